// Reductions over dimensions: sum, mean, prod, amax/amin, max/min (values and first indices),
// argmax/argmin, any/all, var/std (and _mean), linalg_vector_norm/norm, logsumexp; each with
// its out= variant. Shapes, result dtypes and error messages follow PyTorch's CPU kernels.
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <c10/core/DefaultDtype.h>

#include <cmath>
#include <limits>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"
#include "aten/ops/reduce_common.h"

namespace tpu::aten {

namespace reduction {

using hlo::Builder;
using hlo::Compare;
using hlo::ElementType;
using hlo::Reduction;
using hlo::TensorType;
using hlo::Value;

// An absent `dim` reduces every dimension; so does an empty one, except for any/all.dims
// (`empty_reduces_all` false), where it reduces none.
Reduced reduced_shape(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      bool empty_reduces_all) {
  const int64_t rank = self.dim();
  std::bitset<at::dim_bitset_size> mask;
  if (!dim.has_value() || (dim->empty() && empty_reduces_all)) {
    mask.set();
  } else {
    mask = at::dim_list_to_bitset(*dim, rank);
  }
  Reduced r;
  for (int64_t d = 0; d < rank; ++d) {
    if (mask[d]) {
      r.dims.push_back(d);
      r.count *= self.size(d);
      if (keepdim) r.shape.push_back(1);
    } else {
      r.shape.push_back(self.size(d));
    }
  }
  return r;
}

Value splat(Builder& b, double v, const Value& like) {
  return b.broadcast_to(b.constant(v, like.element()), like.dims());
}

// The largest (`upper`) or smallest value of `type`: +-inf for floats, exact limits for integers.
Value extreme(Builder& b, ElementType type, bool upper) {
  if (hlo::is_float(type)) {
    return b.constant(upper ? INFINITY : -INFINITY, type);
  }
  auto limit = [&](auto zero) {
    using T = decltype(zero);
    return std::to_string(upper ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min());
  };
  std::string text;
  switch (type) {
    case ElementType::Pred: text = upper ? "true" : "false"; break;
    case ElementType::S8: text = limit(int8_t{}); break;
    case ElementType::S16: text = limit(int16_t{}); break;
    case ElementType::S32: text = limit(int32_t{}); break;
    case ElementType::S64: text = limit(int64_t{}); break;
    case ElementType::U8: text = limit(uint8_t{}); break;
    case ElementType::U16: text = limit(uint16_t{}); break;
    case ElementType::U32: text = limit(uint32_t{}); break;
    case ElementType::U64: text = limit(uint64_t{}); break;
    default: TORCH_INTERNAL_ASSERT(false, "no extreme value for ", hlo::mlir_name(type));
  }
  TensorType scalar{type, {}};
  return b.op("constant", {}, scalar, "value = dense<" + text + "> : " + scalar.str());
}

// The maximum (or minimum) over `dims`. NaN wins, as on the CPU; XLA's reductions may skip
// NaN (the CPU plugin's do), so a separate any-NaN reduction decides.
Value reduce_extreme(Builder& b, const Value& x, bool max, const std::vector<int64_t>& dims) {
  Reduction kind = x.element() == ElementType::Pred ? (max ? Reduction::Or : Reduction::And)
                                                    : (max ? Reduction::Max : Reduction::Min);
  Value folded = b.reduce(x, extreme(b, x.element(), !max), kind, dims);
  if (!hlo::is_float(x.element())) return folded;
  Value nan =
      b.reduce(b.compare(Compare::NE, x, x), b.constant(0, ElementType::Pred), Reduction::Or, dims);
  return b.select(nan, splat(b, NAN, folded), folded);
}

Value reduce_sum(Builder& b, const Value& x, const std::vector<int64_t>& dims) {
  return b.reduce(x, b.constant(0, x.element()), Reduction::Add, dims);
}

// `reduced` (x reduced over r.dims, without keepdim) broadcast back to x's shape.
Value unreduce(Builder& b, const Value& reduced, const Value& x, const Reduced& r) {
  std::vector<int64_t> kept;
  for (int64_t d = 0, i = 0; d < x.rank(); ++d) {
    if (i < static_cast<int64_t>(r.dims.size()) && r.dims[i] == d) {
      ++i;
    } else {
      kept.push_back(d);
    }
  }
  return b.broadcast_in_dim(reduced, x.dims(), kept);
}

// The value and FIRST index of the maximum (or minimum) along `dim`, as two tensors of x's shape
// without `dim`. NaN counts as larger than everything (max) or smaller (min), as on the CPU; the
// combiner is a total order on (value, -index), so the reduction order does not matter.
std::pair<Value, Value> arg_extreme(Builder& b, const Value& x, int64_t dim, bool max) {
  const int64_t size = x.dims()[dim];
  ElementType index_type =
      size <= std::numeric_limits<int32_t>::max() ? ElementType::S32 : ElementType::S64;
  Value index = b.iota(TensorType{index_type, x.dims()}, dim);
  TensorType value_scalar{x.element(), {}};
  TensorType index_scalar{index_type, {}};
  const bool is_float = hlo::is_float(x.element());
  std::string body = b.region(
      {value_scalar, index_scalar, value_scalar, index_scalar},
      [&](Builder& r, const std::vector<Value>& a) {
        // a = {lhs value, lhs index, rhs value, rhs index}
        Value better = r.compare(max ? Compare::GT : Compare::LT, a[0], a[2]);
        Value tie = r.compare(Compare::EQ, a[0], a[2]);
        if (is_float) {
          Value lhs_nan = r.compare(Compare::NE, a[0], a[0]);
          Value rhs_nan = r.compare(Compare::NE, a[2], a[2]);
          better = r.binary("or", better, r.binary("and", lhs_nan, r.unary("not", rhs_nan)));
          tie = r.binary("or", tie, r.binary("and", lhs_nan, rhs_nan));
        }
        Value first = r.compare(Compare::LT, a[1], a[3]);
        Value take_lhs = r.binary("or", better, r.binary("and", tie, first));
        return std::vector<Value>{r.select(take_lhs, a[0], a[2]), r.select(take_lhs, a[1], a[3])};
      });
  std::vector<int64_t> kept = x.dims();
  kept.erase(kept.begin() + dim);
  std::vector<Value> result =
      b.op_multi("reduce",
                 {b.reduction_input(x, {dim}), index, extreme(b, x.element(), !max),
                  extreme(b, index_type, /*upper=*/true)},
                 {TensorType{x.element(), kept}, TensorType{index_type, kept}},
                 "dimensions = " + hlo::i64_array({dim}), body);
  return {result[0], result[1]};
}

void check_out_dtype(const at::Tensor& out, c10::ScalarType expected) {
  TORCH_CHECK(out.scalar_type() == expected, "Expected out tensor to have dtype ",
              c10::scalarTypeToTypeMeta(expected), ", but got ", out.dtype(), " instead");
}

void check_can_cast(c10::ScalarType from, const at::Tensor& out) {
  TORCH_CHECK(at::canCast(from, out.scalar_type()), "result type ", from,
              " can't be cast to the desired output type ", out.scalar_type());
}

}  // namespace reduction

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::ElementType;
using hlo::Reduction;
using hlo::TensorType;
using hlo::Value;
using namespace reduction;
// ---- sum, mean, prod ----------------------------------------------------------------------

c10::ScalarType integer_upcast_type(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return at::native::get_dtype_from_self(self, dtype, /*promote_integers=*/true);
}

// Sums (or multiplies) in `type`, half precision in float32 as PyTorch's CPU sums do; `divide`
// turns the sum into a mean.
void lower_fold(const char* name, const at::Tensor& self, const Reduced& r, c10::ScalarType type,
                Reduction kind, bool divide, const at::Tensor& out) {
  std::vector<int64_t> statics{static_cast<int64_t>(type), static_cast<int64_t>(kind), divide,
                               r.count, static_cast<int64_t>(r.dims.size())};
  statics.insert(statics.end(), r.dims.begin(), r.dims.end());
  PreparedCall call(name, {&self, &out}, {}, statics);
  if (call.run()) return;
  Program p(name, &call);
  auto& b = p.b();
  hlo::Value x = p.read(self, opmath_type(type));
  hlo::Value total =
      b.reduce(x, b.constant(kind == Reduction::Mul ? 1 : 0, x.element()), kind, r.dims);
  if (divide) {
    total = b.binary("divide", total, splat(b, static_cast<double>(r.count), total));
  }
  p.write(out, b.reshape(total, r.shape));
  p.run();
}

c10::ScalarType mean_type(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  c10::ScalarType type = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(type) || at::isComplexType(type),
              "mean(): could not infer output dtype. ", dtype.has_value() ? "Optional" : "Input",
              " dtype must be either a floating point or complex dtype. Got: ", type);
  return type;
}

}  // namespace

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  Reduced r = reduced_shape(self, dim, keepdim);
  c10::ScalarType type = integer_upcast_type(self, dtype);
  at::Tensor out = new_empty(r.shape, self.options().dtype(type));
  lower_fold("aten::sum", self, r, type, Reduction::Add, false, out);
  return out;
}

at::Tensor sum(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return tpu::aten::sum_dim(self, std::nullopt, false, dtype);
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  Reduced r = reduced_shape(self, dim, keepdim);
  if (dtype.has_value()) check_out_dtype(out, *dtype);
  at::native::resize_output(out, r.shape);
  lower_fold("aten::sum", self, r, out.scalar_type(), Reduction::Add, false, out);
  return out;
}

at::Tensor mean_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  c10::ScalarType type = mean_type(self, dtype);
  Reduced r = reduced_shape(self, dim, keepdim);
  at::Tensor out = new_empty(r.shape, self.options().dtype(type));
  lower_fold("aten::mean", self, r, type, Reduction::Add, true, out);
  return out;
}

at::Tensor mean(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return tpu::aten::mean_dim(self, std::nullopt, false, dtype);
}

at::Tensor& mean_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  c10::ScalarType type = mean_type(self, dtype);
  if (dtype.has_value()) check_out_dtype(out, *dtype);
  check_can_cast(type, out);
  Reduced r = reduced_shape(self, dim, keepdim);
  at::native::resize_output(out, r.shape);
  lower_fold("aten::mean.out", self, r, out.scalar_type(), Reduction::Add, true, out);
  return out;
}

at::Tensor& mean_dtype_out(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                           at::Tensor& out) {
  return tpu::aten::mean_out(self, std::nullopt, false, dtype, out);
}

at::Tensor prod(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  Reduced r = reduced_shape(self, std::nullopt, false);
  c10::ScalarType type = integer_upcast_type(self, dtype);
  at::Tensor out = new_empty(r.shape, self.options().dtype(type));
  lower_fold("aten::prod", self, r, type, Reduction::Mul, false, out);
  return out;
}

at::Tensor prod_dim(const at::Tensor& self, int64_t dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype) {
  Reduced r = reduced_shape(self, dim, keepdim);
  c10::ScalarType type = integer_upcast_type(self, dtype);
  at::Tensor out = new_empty(r.shape, self.options().dtype(type));
  lower_fold("aten::prod.dim_int", self, r, type, Reduction::Mul, false, out);
  return out;
}

at::Tensor& prod_out(const at::Tensor& self, int64_t dim, bool keepdim,
                     std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  Reduced r = reduced_shape(self, dim, keepdim);
  if (dtype.has_value()) check_out_dtype(out, *dtype);
  at::native::resize_output(out, r.shape);
  lower_fold("aten::prod.int_out", self, r, out.scalar_type(), Reduction::Mul, false, out);
  return out;
}

// ---- amax/amin, max/min, argmax/argmin ----------------------------------------------------

namespace {

void lower_extreme(const char* name, const at::Tensor& self, const Reduced& r, bool max,
                   const at::Tensor& out) {
  if (out.numel() == 0) return;
  Program p(name);
  auto& b = p.b();
  p.write(out, b.reshape(reduce_extreme(b, p.read(self), max, r.dims), r.shape));
  p.run();
}

Reduced amax_shape(const char* name, const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
  Reduced r = reduced_shape(self, dim, keepdim);
  if (self.numel() == 0) at::native::zero_numel_check_dims(self, dim, name);
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"", name[2] == 'a' ? "max" : "min",
                              "_values_cpu\" not implemented for '", self.scalar_type(), "'");
  return r;
}

void check_full_extreme(const char* name, const at::Tensor& self) {
  TORCH_CHECK(self.numel() > 0, name,
              ": Expected reduction dim to be specified for input.numel() == 0. Specify the "
              "reduction dim with the 'dim' argument.");
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"", name[1] == 'a' ? "max" : "min",
                              "_all\" not implemented for '", self.scalar_type(), "'");
}

// Values and indices of max/min along `dim` (wrapped), or over the flattened tensor without one,
// written to `values` (if defined) and `indices`, both already of `r.shape`.
void lower_arg_extreme(const char* name, const at::Tensor& self, std::optional<int64_t> dim,
                       const Reduced& r, bool max, const at::Tensor& values,
                       const at::Tensor& indices) {
  if (indices.numel() == 0) return;
  Program p(name);
  auto& b = p.b();
  // bool compares as 0/1; a scalar is a one-element row
  Value x =
      p.read(self, self.scalar_type() == c10::kBool ? std::optional(c10::kByte) : std::nullopt);
  if (!dim.has_value() || x.rank() == 0) x = b.reshape(x, {self.numel()});
  auto [value, index] = arg_extreme(b, x, x.rank() == 1 ? 0 : *dim, max);
  if (values.defined()) p.write(values, b.reshape(value, r.shape));
  p.write(indices, b.reshape(index, r.shape));
  p.run();
}

Reduced max_dim_shape(const char* name, const at::Tensor& self, int64_t& dim, bool keepdim) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK(!self.is_complex(), name, ": does not support complex input");
  if (self.numel() == 0) at::native::zero_numel_check_dims(self, dim, name);
  return reduced_shape(self, dim, keepdim);
}

// argmax/argmin: over `dim`, or over the flattened tensor without one.
void lower_arg(const char* name, const char* what, const at::Tensor& self,
               std::optional<int64_t> dim, bool keepdim, bool max, const at::Tensor& out) {
  TORCH_CHECK(!self.is_complex(), what, ": does not support complex input");
  TORCH_CHECK(self.scalar_type() != c10::kBool, what, ": does not support bool input");
  Reduced r;
  if (dim.has_value()) {
    int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    if (self.numel() == 0) at::native::zero_numel_check_dims(self, d, what);
    r = reduced_shape(self, d, keepdim);
    at::native::resize_output(out, r.shape);
    lower_arg_extreme(name, self, d, r, max, at::Tensor(), out);
  } else {
    TORCH_CHECK_INDEX(self.numel() > 0, what,
                      ": Expected reduction dim to be specified for input.numel() == 0.");
    r = reduced_shape(self, std::nullopt, keepdim);
    at::native::resize_output(out, r.shape);
    lower_arg_extreme(name, self, std::nullopt, r, max, at::Tensor(), out);
  }
}

}  // namespace

namespace {

// amax/amin into `out`, or into a new tensor when `out` is undefined.
at::Tensor amax_amin(bool max, const at::Tensor& self, c10::IntArrayRef dim, bool keepdim,
                     at::Tensor out) {
  Reduced r = amax_shape(max ? "amax()" : "amin()", self, dim, keepdim);
  if (out.defined()) {
    TORCH_CHECK(self.scalar_type() == out.scalar_type(),
                "Expected the dtype for input and out to match, but got ", self.scalar_type(),
                " for input's dtype and ", out.scalar_type(), " for out's dtype.");
    at::native::resize_output(out, r.shape);
  } else {
    out = at::empty(r.shape, self.options());
  }
  lower_extreme(max ? "aten::amax" : "aten::amin", self, r, max, out);
  return out;
}

// max()/min() of every element.
at::Tensor max_min_all(bool max, const at::Tensor& self, at::Tensor out) {
  check_full_extreme(max ? "max()" : "min()", self);
  if (out.defined()) {
    check_can_cast(self.scalar_type(), out);
    at::native::resize_output(out, {});
  } else {
    out = at::empty({}, self.options());
  }
  lower_extreme(max ? "aten::max" : "aten::min", self, reduced_shape(self, std::nullopt, false),
                max, out);
  return out;
}

// max/min.dim: values and first indices, into the given tensors or new ones.
TensorPair max_min_dim(bool max, const at::Tensor& self, int64_t dim, bool keepdim,
                       at::Tensor values, at::Tensor indices) {
  Reduced r = max_dim_shape(max ? "max()" : "min()", self, dim, keepdim);
  if (values.defined()) {
    check_out_dtype(values, self.scalar_type());
    check_out_dtype(indices, c10::kLong);
    at::native::resize_output(values, r.shape);
    at::native::resize_output(indices, r.shape);
  } else {
    values = at::empty(r.shape, self.options());
    indices = at::empty(r.shape, self.options().dtype(c10::kLong));
  }
  lower_arg_extreme(max ? "aten::max.dim" : "aten::min.dim", self, dim, r, max, values, indices);
  return {values, indices};
}

}  // namespace

at::Tensor amax(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
  return amax_amin(true, self, dim, keepdim, at::Tensor());
}
at::Tensor& amax_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  amax_amin(true, self, dim, keepdim, out);
  return out;
}
at::Tensor amin(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
  return amax_amin(false, self, dim, keepdim, at::Tensor());
}
at::Tensor& amin_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  amax_amin(false, self, dim, keepdim, out);
  return out;
}
at::Tensor max(const at::Tensor& self) { return max_min_all(true, self, at::Tensor()); }
at::Tensor& max_unary_out(const at::Tensor& self, at::Tensor& out) {
  max_min_all(true, self, out);
  return out;
}
at::Tensor min(const at::Tensor& self) { return max_min_all(false, self, at::Tensor()); }
at::Tensor& min_unary_out(const at::Tensor& self, at::Tensor& out) {
  max_min_all(false, self, out);
  return out;
}
TensorPair max_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  return max_min_dim(true, self, dim, keepdim, at::Tensor(), at::Tensor());
}
TensorRefPair max_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                          at::Tensor& indices) {
  max_min_dim(true, self, dim, keepdim, values, indices);
  return {values, indices};
}
TensorPair min_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  return max_min_dim(false, self, dim, keepdim, at::Tensor(), at::Tensor());
}
TensorRefPair min_dim_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& values,
                          at::Tensor& indices) {
  max_min_dim(false, self, dim, keepdim, values, indices);
  return {values, indices};
}
at::Tensor argmax(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(c10::kLong));
  lower_arg("aten::argmax", "argmax()", self, dim, keepdim, true, out);
  return out;
}
at::Tensor& argmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out) {
  check_out_dtype(out, c10::kLong);
  lower_arg("aten::argmax", "argmax()", self, dim, keepdim, true, out);
  return out;
}
at::Tensor argmin(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  at::Tensor out = at::empty({0}, self.options().dtype(c10::kLong));
  lower_arg("aten::argmin", "argmin()", self, dim, keepdim, false, out);
  return out;
}
at::Tensor& argmin_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                       at::Tensor& out) {
  check_out_dtype(out, c10::kLong);
  lower_arg("aten::argmin", "argmin()", self, dim, keepdim, false, out);
  return out;
}

}  // namespace tpu::aten
