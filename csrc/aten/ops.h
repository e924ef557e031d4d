#pragma once
// Declarations of the tpu kernels, grouped by the file that implements them.
// registration.cpp maps ATen schemas to these.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

namespace tpu::hlo {
class Builder;
struct Value;
}  // namespace tpu::hlo

namespace tpu::aten {

// The type PyTorch's CPU kernels compute a dtype's elementwise math in: float32 for
// float16 and bfloat16 (rounded once at the end), the dtype itself otherwise.
inline c10::ScalarType opmath_type(c10::ScalarType type) {
  return type == c10::kHalf || type == c10::kBFloat16 ? c10::kFloat : type;
}

// factories.cpp
at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format);
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory);
// A kernel's new contiguous result: empty_memory_format called directly, not through the
// dispatcher (whose boxing and lookup cost a small op about as much as the rest of it).
inline at::Tensor new_empty(c10::IntArrayRef size, const c10::TensorOptions& options) {
  return empty_memory_format(size, options.dtype().toScalarType(), std::nullopt, options.device(),
                             std::nullopt, std::nullopt);
}
at::Tensor& fill_scalar_(at::Tensor& self, const c10::Scalar& value);
at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);
// guard.cpp
void record_stream(at::Tensor& self, c10::Stream stream);
// assert_async.cpp
void assert_async(const at::Tensor& self);
void assert_async_msg(const at::Tensor& self, c10::string_view assert_msg);
// polar.cpp
at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out);
at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                       at::Tensor& out);
at::Tensor& eye_out(int64_t n, at::Tensor& out);
at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out);

// copy.cpp
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking);
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);
c10::Scalar local_scalar_dense(const at::Tensor& self);

// views.cpp
at::Tensor view(const at::Tensor& self, c10::IntArrayRef size);
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset);
at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride);
at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step);
at::Tensor view_as_real(const at::Tensor& self);
at::Tensor view_as_complex(const at::Tensor& self);
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format);
at::Tensor& set_storage_(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                         c10::IntArrayRef size, c10::IntArrayRef stride);
at::Tensor& set_source_storage_(at::Tensor& self, c10::Storage source);
at::Tensor& set_tensor_(at::Tensor& self, const at::Tensor& source);
at::Tensor& set_empty_(at::Tensor& self);

// elementwise.cpp
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                    at::Tensor& out);
at::Tensor add_scalar(const at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha);
at::Tensor& add_scalar_(at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha);
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                    at::Tensor& out);
at::Tensor sub_scalar(const at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha);
at::Tensor& sub_scalar_(at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha);
at::Tensor mul(const at::Tensor& self, const at::Tensor& other);
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other);
at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor mul_scalar(const at::Tensor& self, const c10::Scalar& other);
at::Tensor& mul_scalar_(at::Tensor& self, const c10::Scalar& other);
at::Tensor div(const at::Tensor& self, const at::Tensor& other);
at::Tensor& div_(at::Tensor& self, const at::Tensor& other);
at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor div_scalar(const at::Tensor& self, const c10::Scalar& other);
at::Tensor& div_scalar_(at::Tensor& self, const c10::Scalar& other);
at::Tensor relu(const at::Tensor& self);
at::Tensor& relu_(at::Tensor& self);
at::Tensor threshold_backward(const at::Tensor& grad_output, const at::Tensor& self,
                              const c10::Scalar& threshold);

// unary.cpp: (aten name, lowering in namespace unary, computes in float for integer inputs)
// clang-format off
#define TPU_UNARY_OPS(_) \
  _(abs, false) _(neg, false) _(ceil, false) _(floor, false) _(round, false) \
  _(trunc, false) _(sign, false) _(sgn, false) _(exp, true) _(expm1, true) _(log, true) \
  _(log1p, true) _(log2, true) _(log10, true) _(sqrt, true) _(rsqrt, true) \
  _(reciprocal, true) _(sin, true) _(cos, true) _(tan, true) _(tanh, true) \
  _(sigmoid, true) _(atan, true) _(asin, true) _(acos, true) _(sinh, true) _(cosh, true) \
  _(erf, true) _(exp2, true) _(erfc, true) _(atanh, true) _(asinh, true) _(acosh, true) \
  _(sinc, true)
// clang-format on

using UnaryLowering = hlo::Value (*)(hlo::Builder&, const hlo::Value&);
namespace unary {
#define TPU_DECLARE_UNARY_LOWERING(name, float_op) \
  hlo::Value name(hlo::Builder& b, const hlo::Value& x);
TPU_UNARY_OPS(TPU_DECLARE_UNARY_LOWERING)
#undef TPU_DECLARE_UNARY_LOWERING
}  // namespace unary

void lower_unary(const char* name, UnaryLowering lowering, bool float_op, const at::Tensor& self,
                 const at::Tensor& out);
at::Tensor unary_functional(const char* name, UnaryLowering lowering, bool float_op,
                            const at::Tensor& self);
at::Tensor& unary_in_place(const char* name, UnaryLowering lowering, bool float_op,
                           at::Tensor& self);
at::Tensor& unary_out(const char* name, UnaryLowering lowering, bool float_op,
                      const at::Tensor& self, at::Tensor& out);

// binary.cpp: (aten name, kind, overloads). Kinds: Common computes and returns the
// promoted dtype (Numeric: and rejects bool); Compare/Logical return bool; Float promotes integers
// to float; FloatOnly rejects integer and bool dtypes; Integral rejects floating dtypes. Overload
// sets: TS = .Tensor/.Scalar (+ _out and in-place), T = Tensor only (name, name.out, name_),
// TO = T without the in-place form.
enum class BinaryKind { Common, Numeric, Compare, Logical, Float, FloatOnly, Integral };
// clang-format off
#define TPU_BINARY_OPS(_) \
  _(eq, Compare, TS) _(ne, Compare, TS) _(lt, Compare, TS) _(le, Compare, TS) \
  _(gt, Compare, TS) _(ge, Compare, TS) _(fmod, Numeric, TS) _(remainder, Numeric, TS) \
  _(bitwise_and, Integral, TS) _(bitwise_or, Integral, TS) _(bitwise_xor, Integral, TS) \
  _(maximum, Common, T) _(minimum, Common, T) _(atan2, Float, T) \
  _(logical_and, Logical, T) _(logical_or, Logical, T) _(logical_xor, Logical, T) \
  _(logaddexp, FloatOnly, TO) _(logaddexp2, FloatOnly, TO) _(fmax, Common, TO) \
  _(fmin, Common, TO) _(hypot, FloatOnly, T) _(copysign, Float, none) \
  _(nextafter, FloatOnly, T) _(xlog1py, Float, none)
// clang-format on

using BinaryLowering = hlo::Value (*)(hlo::Builder&, const hlo::Value&, const hlo::Value&);
namespace binary {
#define TPU_DECLARE_BINARY_LOWERING(name, kind, overloads) \
  hlo::Value name(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y);
TPU_BINARY_OPS(TPU_DECLARE_BINARY_LOWERING)
#undef TPU_DECLARE_BINARY_LOWERING
hlo::Value pow(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y);
}  // namespace binary

// One side of a binary op: a tensor (tpu, or a CPU scalar tensor) or a Scalar.
struct BinaryOperand {
  const at::Tensor* tensor = nullptr;
  const c10::Scalar* scalar = nullptr;
};
at::Tensor binary_functional(const char* name, BinaryLowering lowering, BinaryKind kind,
                             const BinaryOperand& self, const BinaryOperand& other);
at::Tensor& binary_in_place(const char* name, BinaryLowering lowering, BinaryKind kind,
                            at::Tensor& self, const BinaryOperand& other);
at::Tensor& binary_out(const char* name, BinaryLowering lowering, BinaryKind kind,
                       const BinaryOperand& self, const BinaryOperand& other, at::Tensor& out);
// div with rounding_mode None (true division), "floor" or "trunc"
at::Tensor div_mode(const at::Tensor& self, const at::Tensor& other,
                    std::optional<c10::string_view> mode);
at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other,
                      std::optional<c10::string_view> mode);
at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other,
                         std::optional<c10::string_view> mode, at::Tensor& out);
at::Tensor floor_divide(const at::Tensor& self, const at::Tensor& other);
at::Tensor& floor_divide_(at::Tensor& self, const at::Tensor& other);
at::Tensor& floor_divide_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);

// random.cpp
at::Tensor& uniform_(at::Tensor& self, double from, double to,
                     std::optional<at::Generator> generator);
at::Tensor& normal_(at::Tensor& self, double mean, double std,
                    std::optional<at::Generator> generator);
at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> generator);
at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator);
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> generator);
at::Tensor& bernoulli_float_(at::Tensor& self, double probability,
                             std::optional<at::Generator> generator);
at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& probability,
                              std::optional<at::Generator> generator);
at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> generator);
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train);
at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask,
                                   double scale);

// unary.cpp, ops whose result is bool or that only take integers
// special_functions.cpp: ops with their own dtype rules
at::Tensor signbit(const at::Tensor& self);
at::Tensor& signbit_out(const at::Tensor& self, at::Tensor& out);
at::Tensor frac(const at::Tensor& self);
at::Tensor& frac_(at::Tensor& self);
at::Tensor& frac_out(const at::Tensor& self, at::Tensor& out);
at::Tensor logit(const at::Tensor& self, std::optional<double> eps);
at::Tensor& logit_(at::Tensor& self, std::optional<double> eps);
at::Tensor& logit_out(const at::Tensor& self, std::optional<double> eps, at::Tensor& out);
at::Tensor heaviside(const at::Tensor& self, const at::Tensor& values);
at::Tensor& heaviside_(at::Tensor& self, const at::Tensor& values);
at::Tensor& heaviside_out(const at::Tensor& self, const at::Tensor& values, at::Tensor& out);
at::Tensor isneginf(const at::Tensor& self);
at::Tensor& isneginf_out(const at::Tensor& self, at::Tensor& out);
at::Tensor isposinf(const at::Tensor& self);
at::Tensor& isposinf_out(const at::Tensor& self, at::Tensor& out);
at::Tensor logical_not(const at::Tensor& self);
at::Tensor& logical_not_(at::Tensor& self);
at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out);
at::Tensor bitwise_not(const at::Tensor& self);
at::Tensor& bitwise_not_(at::Tensor& self);
at::Tensor& bitwise_not_out(const at::Tensor& self, at::Tensor& out);

// ======== reductions and sorting: reduce.cpp, sort.cpp ========
// reduce.cpp
using OptionalDtype = std::optional<c10::ScalarType>;
using OptionalScalar = std::optional<c10::Scalar>;
using TensorPair = std::tuple<at::Tensor, at::Tensor>;
using TensorRefPair = std::tuple<at::Tensor&, at::Tensor&>;
at::Tensor sum(const at::Tensor& self, OptionalDtype dtype);
at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   OptionalDtype dtype);
at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    OptionalDtype dtype, at::Tensor& out);
at::Tensor mean(const at::Tensor& self, OptionalDtype dtype);
at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    OptionalDtype dtype);
at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     OptionalDtype dtype, at::Tensor& out);
at::Tensor& mean_dtype_out(const at::Tensor& self, OptionalDtype dtype, at::Tensor& out);
at::Tensor prod(const at::Tensor& self, OptionalDtype dtype);
at::Tensor prod_dim(const at::Tensor& self, int64_t dim, bool keepdim, OptionalDtype dtype);
at::Tensor& prod_out(const at::Tensor& self, int64_t dim, bool keepdim, OptionalDtype dtype,
                     at::Tensor& out);
at::Tensor amax(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim);
at::Tensor& amax_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, at::Tensor& out);
at::Tensor amin(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim);
at::Tensor& amin_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, at::Tensor& out);
at::Tensor max(const at::Tensor& self);
at::Tensor& max_unary_out(const at::Tensor& self, at::Tensor& out);
at::Tensor min(const at::Tensor& self);
at::Tensor& min_unary_out(const at::Tensor& self, at::Tensor& out);
TensorPair max_dim(const at::Tensor& self, int64_t dim, bool keepdim);
TensorRefPair max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                          at::Tensor& indices);
TensorPair min_dim(const at::Tensor& self, int64_t dim, bool keepdim);
TensorRefPair min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                          at::Tensor& indices);
at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim);
at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out);
at::Tensor argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim);
at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out);
at::Tensor any(const at::Tensor& self);
at::Tensor any_dim(const at::Tensor& self, int64_t dim, bool keepdim);
at::Tensor any_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim);
at::Tensor& any_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out);
at::Tensor& any_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         at::Tensor& out);
at::Tensor& any_all_out(const at::Tensor& self, at::Tensor& out);
at::Tensor all(const at::Tensor& self);
at::Tensor all_dim(const at::Tensor& self, int64_t dim, bool keepdim);
at::Tensor all_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim);
at::Tensor& all_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out);
at::Tensor& all_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         at::Tensor& out);
at::Tensor& all_all_out(const at::Tensor& self, at::Tensor& out);
at::Tensor var_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const OptionalScalar& correction, bool keepdim);
at::Tensor std_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const OptionalScalar& correction, bool keepdim);
TensorPair var_mean_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const OptionalScalar& correction, bool keepdim);
TensorPair std_mean_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const OptionalScalar& correction, bool keepdim);
at::Tensor& var_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const OptionalScalar& correction, bool keepdim, at::Tensor& out);
at::Tensor& std_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const OptionalScalar& correction, bool keepdim, at::Tensor& out);
at::Tensor linalg_vector_norm(const at::Tensor& self, const c10::Scalar& ord,
                              at::OptionalIntArrayRef dim, bool keepdim, OptionalDtype dtype);
at::Tensor& linalg_vector_norm_out(const at::Tensor& self, const c10::Scalar& ord,
                                   at::OptionalIntArrayRef dim, bool keepdim, OptionalDtype dtype,
                                   at::Tensor& out);
at::Tensor norm_dim(const at::Tensor& self, const OptionalScalar& p, c10::IntArrayRef dim,
                    bool keepdim);
at::Tensor norm_dim_dtype(const at::Tensor& self, const OptionalScalar& p, c10::IntArrayRef dim,
                          bool keepdim, c10::ScalarType dtype);
at::Tensor& norm_out(const at::Tensor& self, const OptionalScalar& p, c10::IntArrayRef dim,
                     bool keepdim, at::Tensor& out);
at::Tensor& norm_dtype_out(const at::Tensor& self, const OptionalScalar& p, c10::IntArrayRef dim,
                           bool keepdim, c10::ScalarType dtype, at::Tensor& out);
at::Tensor logsumexp(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim);
at::Tensor& logsumexp_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim,
                          at::Tensor& out);

// sort.cpp
TensorPair sort(const at::Tensor& self, int64_t dim, bool descending);
TensorPair sort_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                       bool descending);
TensorRefPair sort_values(const at::Tensor& self, int64_t dim, bool descending, at::Tensor& values,
                          at::Tensor& indices);
TensorRefPair sort_values_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                 bool descending, at::Tensor& values, at::Tensor& indices);
TensorPair topk(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest, bool sorted);
TensorRefPair topk_values(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                          bool sorted, at::Tensor& values, at::Tensor& indices);
at::Tensor cumsum(const at::Tensor& self, int64_t dim, OptionalDtype dtype);
at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, OptionalDtype dtype, at::Tensor& out);
at::Tensor& cumsum_(at::Tensor& self, int64_t dim, OptionalDtype dtype);
at::Tensor cumprod(const at::Tensor& self, int64_t dim, OptionalDtype dtype);
at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, OptionalDtype dtype, at::Tensor& out);
at::Tensor& cumprod_(at::Tensor& self, int64_t dim, OptionalDtype dtype);
at::Tensor isin_tensor_tensor(const at::Tensor& elements, const at::Tensor& test_elements,
                              bool assume_unique, bool invert);
at::Tensor& isin_tensor_tensor_out(const at::Tensor& elements, const at::Tensor& test_elements,
                                   bool assume_unique, bool invert, at::Tensor& out);
at::Tensor isin_tensor_scalar(const at::Tensor& elements, const c10::Scalar& test_element,
                              bool assume_unique, bool invert);
at::Tensor& isin_tensor_scalar_out(const at::Tensor& elements, const c10::Scalar& test_element,
                                   bool assume_unique, bool invert, at::Tensor& out);
at::Tensor isin_scalar_tensor(const c10::Scalar& element, const at::Tensor& test_elements,
                              bool assume_unique, bool invert);
at::Tensor& isin_scalar_tensor_out(const c10::Scalar& element, const at::Tensor& test_elements,
                                   bool assume_unique, bool invert, at::Tensor& out);

// ======== end of reductions and sorting ========

// matmul.cpp
// What a matrix product's program depends on beyond its operands' metadata (a PreparedCall
// static): the float32 matmul precision (a precision_config in the program) and whether it
// calls the host matmul kernels.
int64_t matmul_setting();
at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                   const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                 const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec,
                   const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                   const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                     const c10::Scalar& beta, const c10::Scalar& alpha);

// conv.cpp
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                       c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                       c10::IntArrayRef output_padding, int64_t groups);
std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask);

// pool.cpp
std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(
    const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode);
at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                                            c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                            bool ceil_mode, const at::Tensor& indices);
at::Tensor avg_pool2d(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override);
at::Tensor avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                               c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override);

// resample.cpp
at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::IntArrayRef output_size);
at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self);
at::Tensor upsample_nearest2d(const at::Tensor& self, c10::IntArrayRef output_size,
                              std::optional<double> scales_h, std::optional<double> scales_w);
at::Tensor upsample_nearest2d_backward(const at::Tensor& grad_output, c10::IntArrayRef output_size,
                                       c10::IntArrayRef input_size, std::optional<double> scales_h,
                                       std::optional<double> scales_w);
at::Tensor upsample_bilinear2d(const at::Tensor& self, c10::IntArrayRef output_size,
                               bool align_corners, std::optional<double> scales_h,
                               std::optional<double> scales_w);
at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_output, c10::IntArrayRef output_size,
                                        c10::IntArrayRef input_size, bool align_corners,
                                        std::optional<double> scales_h,
                                        std::optional<double> scales_w);

// foreach.cpp: makes every _foreach_* op run its per-tensor reference loop on tpu.
// Called once from the Python module's initialisation (all ATen ops are known then).
void register_foreach_kernels();

// ======== neural-network ops: activation.cpp, norm.cpp, softmax.cpp, loss.cpp, pointwise.cpp
// ========
// activation.cpp
at::Tensor gelu(const at::Tensor& self, c10::string_view approximate);
at::Tensor& gelu_(at::Tensor& self, c10::string_view approximate);
at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out);
at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self,
                         c10::string_view approximate);
at::Tensor silu(const at::Tensor& self);
at::Tensor& silu_(at::Tensor& self);
at::Tensor& silu_out(const at::Tensor& self, at::Tensor& out);
at::Tensor silu_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor softplus(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold);
at::Tensor& softplus_out(const at::Tensor& self, const c10::Scalar& beta,
                         const c10::Scalar& threshold, at::Tensor& out);
at::Tensor softplus_backward(const at::Tensor& grad, const at::Tensor& self,
                             const c10::Scalar& beta, const c10::Scalar& threshold);
at::Tensor leaky_relu(const at::Tensor& self, const c10::Scalar& slope);
at::Tensor& leaky_relu_(at::Tensor& self, const c10::Scalar& slope);
at::Tensor& leaky_relu_out(const at::Tensor& self, const c10::Scalar& slope, at::Tensor& out);
at::Tensor leaky_relu_backward(const at::Tensor& grad, const at::Tensor& self,
                               const c10::Scalar& slope, bool self_is_result);
at::Tensor elu(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
               const c10::Scalar& input_scale);
at::Tensor& elu_(at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                 const c10::Scalar& input_scale);
at::Tensor& elu_out(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                    const c10::Scalar& input_scale, at::Tensor& out);
at::Tensor elu_backward(const at::Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                        const c10::Scalar& input_scale, bool is_result,
                        const at::Tensor& self_or_result);
at::Tensor hardtanh(const at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max);
at::Tensor& hardtanh_(at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max);
at::Tensor& hardtanh_out(const at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max,
                         at::Tensor& out);
at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& min,
                             const c10::Scalar& max);
at::Tensor hardswish(const at::Tensor& self);
at::Tensor& hardswish_(at::Tensor& self);
at::Tensor& hardswish_out(const at::Tensor& self, at::Tensor& out);
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor hardsigmoid(const at::Tensor& self);
at::Tensor& hardsigmoid_(at::Tensor& self);
at::Tensor& hardsigmoid_out(const at::Tensor& self, at::Tensor& out);
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor sigmoid_backward(const at::Tensor& grad, const at::Tensor& output);
at::Tensor tanh_backward(const at::Tensor& grad, const at::Tensor& output);

// softmax.cpp
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float);
at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out);
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float);
at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float,
                            at::Tensor& out);
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype);
at::Tensor& softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 c10::ScalarType input_dtype, at::Tensor& grad_input);
at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                c10::ScalarType input_dtype);
at::Tensor& log_softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                     c10::ScalarType input_dtype, at::Tensor& grad_input);

// norm.cpp
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> mask);
std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input,
                                                  c10::IntArrayRef normalized_shape,
                                                  const std::optional<at::Tensor>& weight,
                                                  std::optional<double> eps);
std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, std::array<bool, 2> mask);
std::tuple<at::Tensor, at::Tensor> weight_norm_interface(const at::Tensor& v, const at::Tensor& g,
                                                         int64_t dim);
std::tuple<at::Tensor, at::Tensor> weight_norm_interface_backward(const at::Tensor& grad_w,
                                                                  const at::Tensor& saved_v,
                                                                  const at::Tensor& saved_g,
                                                                  const at::Tensor& saved_norms,
                                                                  int64_t dim);

// pointwise.cpp
at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other);
at::Tensor& where_self_out(const at::Tensor& condition, const at::Tensor& self,
                           const at::Tensor& other, at::Tensor& out);
at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value);
at::Tensor& masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value);
at::Tensor masked_fill_scalar(const at::Tensor& self, const at::Tensor& mask,
                              const c10::Scalar& value);
at::Tensor masked_fill_tensor(const at::Tensor& self, const at::Tensor& mask,
                              const at::Tensor& value);
at::Tensor clamp(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                 const std::optional<c10::Scalar>& max);
at::Tensor& clamp_out(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                      const std::optional<c10::Scalar>& max, at::Tensor& out);
at::Tensor& clamp_(at::Tensor& self, const std::optional<c10::Scalar>& min,
                   const std::optional<c10::Scalar>& max);
at::Tensor clamp_tensor(const at::Tensor& self, const std::optional<at::Tensor>& min,
                        const std::optional<at::Tensor>& max);
at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& out);
at::Tensor& clamp_tensor_(at::Tensor& self, const std::optional<at::Tensor>& min,
                          const std::optional<at::Tensor>& max);
#define TPU_DECLARE_CLAMP_SIDE(fn, ArgType)                                     \
  at::Tensor fn(const at::Tensor& self, ArgType bound);                         \
  at::Tensor& fn##_out(const at::Tensor& self, ArgType bound, at::Tensor& out); \
  at::Tensor& fn##_(at::Tensor& self, ArgType bound);
TPU_DECLARE_CLAMP_SIDE(clamp_min, const c10::Scalar&)
TPU_DECLARE_CLAMP_SIDE(clamp_max, const c10::Scalar&)
TPU_DECLARE_CLAMP_SIDE(clamp_min_tensor, const at::Tensor&)
TPU_DECLARE_CLAMP_SIDE(clamp_max_tensor, const at::Tensor&)
#undef TPU_DECLARE_CLAMP_SIDE
at::Tensor lerp_scalar(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight);
at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end,
                            const c10::Scalar& weight, at::Tensor& out);
at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight);
at::Tensor lerp_tensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight);
at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight,
                            at::Tensor& out);
at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight);
#define TPU_DECLARE_ADDC(fn)                                                               \
  at::Tensor fn(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,        \
                const c10::Scalar& value);                                                 \
  at::Tensor& fn##_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, \
                       const c10::Scalar& value, at::Tensor& out);                         \
  at::Tensor& fn##_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,          \
                    const c10::Scalar& value);
TPU_DECLARE_ADDC(addcmul)
TPU_DECLARE_ADDC(addcdiv)
#undef TPU_DECLARE_ADDC
at::Tensor isnan(const at::Tensor& self);
at::Tensor nan_to_num(const at::Tensor& self, std::optional<double> nan,
                      std::optional<double> posinf, std::optional<double> neginf);
at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan,
                           std::optional<double> posinf, std::optional<double> neginf,
                           at::Tensor& out);
at::Tensor& nan_to_num_(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf);

// loss.cpp
at::Tensor mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction);
at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out);
at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction);

// nll_loss.cpp
std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self,
                                                    const at::Tensor& target,
                                                    const std::optional<at::Tensor>& weight,
                                                    int64_t reduction, int64_t ignore_index);
std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(
    const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
    int64_t reduction, int64_t ignore_index, at::Tensor& output, at::Tensor& total_weight);
at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, const std::optional<at::Tensor>& weight,
                             int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight);
std::tuple<at::Tensor, at::Tensor> nll_loss2d_forward(const at::Tensor& self,
                                                      const at::Tensor& target,
                                                      const std::optional<at::Tensor>& weight,
                                                      int64_t reduction, int64_t ignore_index);
at::Tensor nll_loss2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               const at::Tensor& target, const std::optional<at::Tensor>& weight,
                               int64_t reduction, int64_t ignore_index,
                               const at::Tensor& total_weight);

// batch_norm.cpp
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    bool training, double momentum, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit_no_stats(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, bool training, double momentum, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> mask);

// group_norm.cpp
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, int64_t N, int64_t C, int64_t HxW, int64_t group,
    double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, int64_t N, int64_t C,
    int64_t HxW, int64_t group, std::array<bool, 3> mask);

// loss_extra.cpp
at::Tensor binary_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                const std::optional<at::Tensor>& weight, int64_t reduction);
at::Tensor& binary_cross_entropy_out(const at::Tensor& self, const at::Tensor& target,
                                     const std::optional<at::Tensor>& weight, int64_t reduction,
                                     at::Tensor& out);
at::Tensor binary_cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                         const at::Tensor& target,
                                         const std::optional<at::Tensor>& weight,
                                         int64_t reduction);
at::Tensor binary_cross_entropy_with_logits(const at::Tensor& self, const at::Tensor& target,
                                            const std::optional<at::Tensor>& weight,
                                            const std::optional<at::Tensor>& pos_weight,
                                            int64_t reduction);
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self);
std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self,
                                                             at::Tensor& output,
                                                             at::Tensor& buffer);
at::Tensor log_sigmoid_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                const at::Tensor& buffer);
at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                     const at::Tensor& buffer, at::Tensor& grad_input);
at::Tensor smooth_l1_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                          double beta);
at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                               double beta, at::Tensor& out);
at::Tensor smooth_l1_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                   const at::Tensor& target, int64_t reduction, double beta);
at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& target, int64_t reduction, double beta,
                                        at::Tensor& grad_input);
at::Tensor huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                      double delta);
at::Tensor& huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                           double delta, at::Tensor& out);
at::Tensor huber_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               const at::Tensor& target, int64_t reduction, double delta);
at::Tensor& huber_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    const at::Tensor& target, int64_t reduction, double delta,
                                    at::Tensor& grad_input);

// random_extra.cpp
at::Tensor randperm(int64_t n, std::optional<c10::ScalarType> dtype,
                    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                    std::optional<bool> pin_memory);
at::Tensor randperm_generator(int64_t n, std::optional<at::Generator> generator,
                              std::optional<c10::ScalarType> dtype,
                              std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                              std::optional<bool> pin_memory);
at::Tensor& randperm_out(int64_t n, at::Tensor& out);
at::Tensor& randperm_generator_out(int64_t n, std::optional<at::Generator> generator,
                                   at::Tensor& out);
at::Tensor multinomial(const at::Tensor& self, int64_t num_samples, bool replacement,
                       std::optional<at::Generator> generator);
at::Tensor& multinomial_out(const at::Tensor& self, int64_t num_samples, bool replacement,
                            std::optional<at::Generator> generator, at::Tensor& out);

// ======== end of neural-network ops ========

// The two sections below and above are kept apart so that work on each merges cleanly.

// ======== indexing and shape: index.cpp, shape.cpp ========
// index.cpp
at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             at::Tensor& out);
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index);
at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out);
at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad);
at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out);
at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const c10::Scalar& value, at::Tensor& out);
at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                               const at::Tensor& src, c10::string_view reduce, at::Tensor& out);
at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const c10::Scalar& value, c10::string_view reduce,
                                     at::Tensor& out);
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out);
at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                   const at::Tensor& src, c10::string_view reduce,
                                   bool include_self, at::Tensor& out);
at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& source, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                    int64_t num_weights, int64_t padding_idx,
                                    bool scale_grad_by_freq);

// index_advanced.cpp
at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                      at::Tensor& out);
at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices);
at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool unsafe);
at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask);
at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out);
at::Tensor nonzero(const at::Tensor& self);
at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out);

// shape.cpp
at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out);
at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim);
at::Tensor flip(const at::Tensor& self, c10::IntArrayRef dims);
at::Tensor roll(const at::Tensor& self, c10::IntArrayRef shifts, c10::IntArrayRef dims);
at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out);
at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out);
at::Tensor tril(const at::Tensor& self, int64_t diagonal);
at::Tensor triu(const at::Tensor& self, int64_t diagonal);
at::Tensor& tril_(at::Tensor& self, int64_t diagonal);
at::Tensor& triu_(at::Tensor& self, int64_t diagonal);
at::Tensor constant_pad_nd(const at::Tensor& self, c10::IntArrayRef pad, const c10::Scalar& value);
#define TPU_DECLARE_PAD(name)                                                            \
  at::Tensor& name##_out(const at::Tensor& self, c10::IntArrayRef pad, at::Tensor& out); \
  at::Tensor name(const at::Tensor& self, c10::IntArrayRef pad);                         \
  at::Tensor& name##_backward_out(const at::Tensor& grad, const at::Tensor& self,        \
                                  c10::IntArrayRef pad, at::Tensor& grad_input);         \
  at::Tensor name##_backward(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef pad);
TPU_DECLARE_PAD(reflection_pad1d)
TPU_DECLARE_PAD(reflection_pad2d)
TPU_DECLARE_PAD(replication_pad1d)
TPU_DECLARE_PAD(replication_pad2d)
#undef TPU_DECLARE_PAD

// ======== end of indexing and shape ========

// ======== mixed precision: amp.cpp ========
void amp_foreach_non_finite_check_and_unscale_(at::TensorList grads, at::Tensor& found_inf,
                                               const at::Tensor& inv_scale);
at::Tensor& amp_update_scale_(at::Tensor& scale, at::Tensor& growth_tracker,
                              const at::Tensor& found_inf, double growth_factor,
                              double backoff_factor, int64_t growth_interval);
// ======== end of mixed precision ========

// pointwise.cpp: lerp's math (also the foreach lerp's)
hlo::Value lerp(hlo::Builder& b, const hlo::Value& start, const hlo::Value& end,
                const hlo::Value& weight);

// attention.cpp (it also answers PyTorch's _fused_sdp_choice_stub for tpu tensors)
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool return_debug_mask, std::optional<double> scale);
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& cum_seq_q,
    const at::Tensor& cum_seq_k, c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
    bool is_causal, const at::Tensor& philox_seed, const at::Tensor& philox_offset,
    std::optional<double> scale);

}  // namespace tpu::aten
