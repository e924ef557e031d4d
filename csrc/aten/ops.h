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
at::Tensor& fill_scalar_(at::Tensor& self, const c10::Scalar& value);
at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);
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
#define TPU_UNARY_OPS(_)                                                                          \
  _(abs, false)                                                                                   \
  _(neg, false)                                                                                   \
  _(ceil, false) _(floor, false) _(round, false) _(trunc, false) _(sign, false) _(exp, true)      \
      _(expm1, true) _(log, true) _(log1p, true) _(log2, true) _(log10, true) _(sqrt, true)       \
          _(rsqrt, true) _(reciprocal, true) _(sin, true) _(cos, true) _(tan, true) _(tanh, true) \
              _(sigmoid, true) _(atan, true) _(asin, true) _(acos, true) _(sinh, true)            \
                  _(cosh, true)

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
// to float; Integral rejects floating dtypes. Overload sets: TS = .Tensor/.Scalar (+ _out and
// in-place), T = Tensor only (name, name.out, name_).
enum class BinaryKind { Common, Numeric, Compare, Logical, Float, Integral };
#define TPU_BINARY_OPS(_)                                                                          \
  _(eq, Compare, TS)                                                                               \
  _(ne, Compare, TS)                                                                               \
  _(lt, Compare, TS) _(le, Compare, TS) _(gt, Compare, TS) _(ge, Compare, TS) _(fmod, Numeric, TS) \
      _(remainder, Numeric, TS) _(bitwise_and, Integral, TS) _(bitwise_or, Integral, TS)           \
          _(bitwise_xor, Integral, TS) _(maximum, Common, T) _(minimum, Common, T)                 \
              _(atan2, Float, T) _(logical_and, Logical, T) _(logical_or, Logical, T)              \
                  _(logical_xor, Logical, T)

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

// ======== end of reductions and sorting ========

// matmul.cpp
at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                 const c10::Scalar& beta, const c10::Scalar& alpha);
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                      const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                   const c10::Scalar& beta, const c10::Scalar& alpha);

// ======== neural-network ops: activation.cpp, norm.cpp, softmax.cpp, loss.cpp, pointwise.cpp
// ======== loss.cpp
at::Tensor mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction);
at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out);
at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction);

// ======== end of neural-network ops ========

// The two sections below and above are kept apart so that work on each merges cleanly.

// ======== indexing and shape: index.cpp, shape.cpp ========

// ======== end of indexing and shape ========

}  // namespace tpu::aten
