// Statistical reductions: any/all, var/std (and _mean) with correction,
// linalg_vector_norm/norm and logsumexp, each with its out= variant; shapes, dtypes and
// errors as in PyTorch's CPU kernels.
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

using namespace reduction;
using hlo::Builder;
using hlo::Compare;
using hlo::ElementType;
using hlo::Reduction;
using hlo::TensorType;
using hlo::Value;

// ---- any/all ------------------------------------------------------------------------------

namespace {

// Non-zero test then a logical fold; the result is bool, or uint8 for uint8 input (as on the CPU).
void lower_any_all(const char* name, const at::Tensor& self, const Reduced& r, bool any,
                   const at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == c10::kBool || out.scalar_type() == c10::kByte,
              any ? "any" : "all",
              " only supports bool tensor for result, got: ", out.scalar_type());
  if (out.numel() == 0) return;
  Program p(name);
  auto& b = p.b();
  Value x = p.read(self);
  Value truth = x.element() == ElementType::Pred || hlo::is_complex(x.element())
                    ? b.convert(x, ElementType::Pred)
                    : b.compare(Compare::NE, x, splat(b, 0, x));
  Value folded = b.reduce(truth, b.constant(any ? 0 : 1, ElementType::Pred),
                          any ? Reduction::Or : Reduction::And, r.dims);
  p.write(out, b.reshape(folded, r.shape));
  p.run();
}

c10::ScalarType logical_type(const at::Tensor& self) {
  return self.scalar_type() == c10::kByte ? c10::kByte : c10::kBool;
}

at::Tensor any_all(const char* name, const at::Tensor& self, at::OptionalIntArrayRef dim,
                   bool keepdim, bool any) {
  Reduced r = reduced_shape(self, dim, keepdim, /*empty_reduces_all=*/false);
  at::Tensor out = at::empty(r.shape, self.options().dtype(logical_type(self)));
  lower_any_all(name, self, r, any, out);
  return out;
}

at::Tensor& any_all_out(const char* name, const at::Tensor& self, at::OptionalIntArrayRef dim,
                        bool keepdim, bool any, at::Tensor& out) {
  Reduced r = reduced_shape(self, dim, keepdim, /*empty_reduces_all=*/false);
  at::native::resize_output(out, r.shape);
  lower_any_all(name, self, r, any, out);
  return out;
}

}  // namespace

at::Tensor any(const at::Tensor& self) {
  return any_all("aten::any", self, std::nullopt, false, true);
}
at::Tensor any_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  return any_all("aten::any.dim", self, dim, keepdim, true);
}
at::Tensor any_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  return any_all("aten::any.dims", self, dim, keepdim, true);
}
at::Tensor& any_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return any_all_out("aten::any.out", self, dim, keepdim, true, out);
}
at::Tensor& any_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         at::Tensor& out) {
  return any_all_out("aten::any.dims_out", self, dim, keepdim, true, out);
}
at::Tensor& any_all_out(const at::Tensor& self, at::Tensor& out) {
  return any_all_out("aten::any.all_out", self, std::nullopt, false, true, out);
}
at::Tensor all(const at::Tensor& self) {
  return any_all("aten::all", self, std::nullopt, false, false);
}
at::Tensor all_dim(const at::Tensor& self, int64_t dim, bool keepdim) {
  return any_all("aten::all.dim", self, dim, keepdim, false);
}
at::Tensor all_dims(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  return any_all("aten::all.dims", self, dim, keepdim, false);
}
at::Tensor& all_out(const at::Tensor& self, int64_t dim, bool keepdim, at::Tensor& out) {
  return any_all_out("aten::all.out", self, dim, keepdim, false, out);
}
at::Tensor& all_dims_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         at::Tensor& out) {
  return any_all_out("aten::all.dims_out", self, dim, keepdim, false, out);
}
at::Tensor& all_all_out(const at::Tensor& self, at::Tensor& out) {
  return any_all_out("aten::all.all_out", self, std::nullopt, false, false, out);
}

// ---- var/std ------------------------------------------------------------------------------

namespace {

enum class Moments { Var, Std, VarMean, StdMean };

// Two passes in the opmath type: the mean, then the mean squared distance from it (|x - mean|^2
// for complex input, a real result), divided by max(0, N - correction).
void lower_moments(const char* name, const at::Tensor& self, at::OptionalIntArrayRef dim,
                   const std::optional<c10::Scalar>& correction, bool keepdim, Moments kind,
                   const at::Tensor& spread_out, const at::Tensor& mean_out) {
  Reduced r = reduced_shape(self, dim, keepdim);
  const double dof = static_cast<double>(r.count) - (correction ? correction->toDouble() : 1.0);
  if (dof <= 0) {
    static const char* const names[] = {"var", "std", "var_mean", "std_mean"};
    TORCH_WARN(names[static_cast<int>(kind)],
               "(): degrees of freedom is <= 0. Correction should be strictly less than the "
               "reduction factor (input numel divided by output numel).");
  }
  if (spread_out.numel() == 0) return;
  Program p(name);
  auto& b = p.b();
  Value x = p.read(self, opmath_type(self.scalar_type()));
  Value sum = reduce_sum(b, x, r.dims);
  Value mean = b.binary("divide", sum, splat(b, static_cast<double>(r.count), sum));
  Value centered = b.binary("subtract", x, unreduce(b, mean, x, r));
  Value square;
  if (hlo::is_complex(x.element())) {
    Value re = b.complex_parts(centered, false);
    Value im = b.complex_parts(centered, true);
    square = b.binary("add", b.binary("multiply", re, re), b.binary("multiply", im, im));
  } else {
    square = b.binary("multiply", centered, centered);
  }
  Value total = reduce_sum(b, square, r.dims);
  Value spread = b.binary("divide", total, splat(b, std::max(0.0, dof), total));
  if (kind == Moments::Std || kind == Moments::StdMean) spread = b.unary("sqrt", spread);
  p.write(spread_out, b.reshape(spread, r.shape));
  if (mean_out.defined()) p.write(mean_out, b.reshape(mean, r.shape));
  p.run();
}

void check_moments_dtype(const at::Tensor& self) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "std and var only support floating point and complex dtypes");
}

at::Tensor moments(const char* name, const at::Tensor& self, at::OptionalIntArrayRef dim,
                   const std::optional<c10::Scalar>& correction, bool keepdim, Moments kind) {
  check_moments_dtype(self);
  Reduced r = reduced_shape(self, dim, keepdim);
  at::Tensor out =
      at::empty(r.shape, self.options().dtype(c10::toRealValueType(self.scalar_type())));
  lower_moments(name, self, dim, correction, keepdim, kind, out, at::Tensor());
  return out;
}

std::tuple<at::Tensor, at::Tensor> moments_mean(const char* name, const at::Tensor& self,
                                                at::OptionalIntArrayRef dim,
                                                const std::optional<c10::Scalar>& correction,
                                                bool keepdim, Moments kind) {
  check_moments_dtype(self);
  Reduced r = reduced_shape(self, dim, keepdim);
  at::Tensor spread =
      at::empty(r.shape, self.options().dtype(c10::toRealValueType(self.scalar_type())));
  at::Tensor mean = at::empty(r.shape, self.options());
  lower_moments(name, self, dim, correction, keepdim, kind, spread, mean);
  return {spread, mean};
}

at::Tensor& moments_out(const char* name, const at::Tensor& self, at::OptionalIntArrayRef dim,
                        const std::optional<c10::Scalar>& correction, bool keepdim, Moments kind,
                        at::Tensor& out) {
  check_moments_dtype(self);
  check_can_cast(c10::toRealValueType(self.scalar_type()), out);
  at::native::resize_output(out, reduced_shape(self, dim, keepdim).shape);
  lower_moments(name, self, dim, correction, keepdim, kind, out, at::Tensor());
  return out;
}

}  // namespace

at::Tensor var_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar>& correction, bool keepdim) {
  return moments("aten::var.correction", self, dim, correction, keepdim, Moments::Var);
}
at::Tensor std_correction(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar>& correction, bool keepdim) {
  return moments("aten::std.correction", self, dim, correction, keepdim, Moments::Std);
}
std::tuple<at::Tensor, at::Tensor> var_mean_correction(const at::Tensor& self,
                                                       at::OptionalIntArrayRef dim,
                                                       const std::optional<c10::Scalar>& correction,
                                                       bool keepdim) {
  return moments_mean("aten::var_mean.correction", self, dim, correction, keepdim,
                      Moments::VarMean);
}
std::tuple<at::Tensor, at::Tensor> std_mean_correction(const at::Tensor& self,
                                                       at::OptionalIntArrayRef dim,
                                                       const std::optional<c10::Scalar>& correction,
                                                       bool keepdim) {
  return moments_mean("aten::std_mean.correction", self, dim, correction, keepdim,
                      Moments::StdMean);
}
at::Tensor& var_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const std::optional<c10::Scalar>& correction, bool keepdim,
                               at::Tensor& out) {
  return moments_out("aten::var.correction_out", self, dim, correction, keepdim, Moments::Var, out);
}
at::Tensor& std_correction_out(const at::Tensor& self, at::OptionalIntArrayRef dim,
                               const std::optional<c10::Scalar>& correction, bool keepdim,
                               at::Tensor& out) {
  return moments_out("aten::std.correction_out", self, dim, correction, keepdim, Moments::Std, out);
}

// ---- linalg_vector_norm, norm -------------------------------------------------------------

namespace {

c10::ScalarType vector_norm_type(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  c10::ScalarType in = self.scalar_type();
  TORCH_CHECK(at::isFloatingType(in) || at::isComplexType(in),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", in);
  if (!dtype.has_value()) return c10::toRealValueType(in);
  TORCH_CHECK(at::isFloatingType(*dtype) || at::isComplexType(*dtype),
              "linalg.vector_norm: dtype should be floating point or complex, but got ", *dtype);
  TORCH_CHECK(
      at::isComplexType(in) == at::isComplexType(*dtype), "linalg.vector_norm: dtype should be ",
      at::isComplexType(in) ? "complex for complex" : "real for real", " inputs, but got ", *dtype);
  TORCH_CHECK(at::promoteTypes(in, *dtype) == *dtype, "linalg.vector_norm: the dtype of the input ",
              "(", in, ") should be convertible without narrowing to the specified dtype (", *dtype,
              ")");
  return c10::toRealValueType(*dtype);
}

// Norms without an identity (inf, and negative orders) cannot reduce empty dimensions.
void check_vector_norm_empty(const at::Tensor& self, const c10::Scalar& ord, const Reduced& r,
                             at::OptionalIntArrayRef dim) {
  const double p = ord.toDouble();
  if (self.numel() != 0 || !(p < 0 || std::isinf(p))) return;
  const bool all = !dim.has_value() || dim->empty();
  TORCH_CHECK(!all, "linalg.vector_norm cannot compute the ", ord,
              " norm on an empty tensor because the operation does not have an identity");
  for (int64_t d : r.dims) {
    TORCH_CHECK(self.size(d) != 0, "linalg.vector_norm cannot compute the ", ord,
                " norm on the dimension ", d,
                "because this dimension is empty and the operation does not have an identity");
  }
}

void lower_vector_norm(const char* name, const at::Tensor& self, const c10::Scalar& ord,
                       const Reduced& r, std::optional<c10::ScalarType> dtype,
                       const at::Tensor& out) {
  if (out.numel() == 0) return;
  const double p = ord.toDouble();
  Program prog(name);
  auto& b = prog.b();
  Value x = prog.read(self, opmath_type(dtype.value_or(self.scalar_type())));
  Value a = unary::abs(b, x);  // real
  Value norm;
  if (p == 0) {
    norm = reduce_sum(b, b.convert(b.compare(Compare::NE, a, splat(b, 0, a)), a.element()), r.dims);
  } else if (std::isinf(p)) {
    norm = reduce_extreme(b, a, p > 0, r.dims);
  } else if (p == 1) {
    norm = reduce_sum(b, a, r.dims);
  } else if (p == 2) {
    norm = b.unary("sqrt", reduce_sum(b, b.binary("multiply", a, a), r.dims));
  } else {  // the order is a run-time operand: other orders reuse the program
    c10::ScalarType real = scalar_type(a.element());
    Value power = prog.scalar(p, real);
    Value inverse = prog.scalar(1.0 / p, real);
    Value sum = reduce_sum(b, b.binary("power", a, b.broadcast_to(power, a.dims())), r.dims);
    norm = b.binary("power", sum, b.broadcast_to(inverse, sum.dims()));
  }
  prog.write(out, b.reshape(norm, r.shape));
  prog.run();
}

}  // namespace

at::Tensor& linalg_vector_norm_out(const at::Tensor& self, const c10::Scalar& ord,
                                   at::OptionalIntArrayRef dim, bool keepdim,
                                   std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  c10::ScalarType type = vector_norm_type(self, dtype);
  check_out_dtype(out, type);
  Reduced r = reduced_shape(self, dim, keepdim);
  check_vector_norm_empty(self, ord, r, dim);
  at::native::resize_output(out, r.shape);
  lower_vector_norm("aten::linalg_vector_norm", self, ord, r, dtype, out);
  return out;
}

at::Tensor linalg_vector_norm(const at::Tensor& self, const c10::Scalar& ord,
                              at::OptionalIntArrayRef dim, bool keepdim,
                              std::optional<c10::ScalarType> dtype) {
  at::Tensor out = at::empty({0}, self.options().dtype(vector_norm_type(self, dtype)));
  return tpu::aten::linalg_vector_norm_out(self, ord, dim, keepdim, dtype, out);
}

at::Tensor norm_dim(const at::Tensor& self, const std::optional<c10::Scalar>& p,
                    c10::IntArrayRef dim, bool keepdim) {
  return tpu::aten::linalg_vector_norm(self, p.value_or(2.0), dim, keepdim, std::nullopt);
}
at::Tensor norm_dim_dtype(const at::Tensor& self, const std::optional<c10::Scalar>& p,
                          c10::IntArrayRef dim, bool keepdim, c10::ScalarType dtype) {
  return tpu::aten::linalg_vector_norm(self, p.value_or(2.0), dim, keepdim, dtype);
}
at::Tensor& norm_out(const at::Tensor& self, const std::optional<c10::Scalar>& p,
                     c10::IntArrayRef dim, bool keepdim, at::Tensor& out) {
  return tpu::aten::linalg_vector_norm_out(self, p.value_or(2.0), dim, keepdim, std::nullopt, out);
}
at::Tensor& norm_dtype_out(const at::Tensor& self, const std::optional<c10::Scalar>& p,
                           c10::IntArrayRef dim, bool keepdim, c10::ScalarType dtype,
                           at::Tensor& out) {
  return tpu::aten::linalg_vector_norm_out(self, p.value_or(2.0), dim, keepdim, dtype, out);
}

// ---- logsumexp ----------------------------------------------------------------------------

at::Tensor& logsumexp_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim,
                          at::Tensor& out) {
  TORCH_CHECK(
      at::isFloatingType(out.scalar_type()) || at::isComplexType(out.scalar_type()),
      "logsumexp(): Expected floating point type for result tensor, but got: ", out.scalar_type());
  // The CPU kernel adds the kept-dims maximum to the result in place; with dim=() and no
  // keepdim those shapes differ, and it raises.
  TORCH_CHECK(!dim.empty() || keepdim || self.dim() == 0, "output with shape [] doesn't match ",
              "the broadcast shape ", c10::IntArrayRef(std::vector<int64_t>(self.dim(), 1)));
  Reduced r = reduced_shape(self, dim, keepdim);
  at::native::resize_output(out, r.shape);
  if (out.numel() == 0) return out;
  c10::ScalarType type = at::isIntegralType(self.scalar_type(), /*includeBool=*/true)
                             ? c10::typeMetaToScalarType(c10::get_default_dtype())
                             : self.scalar_type();
  Program p("aten::logsumexp");
  auto& b = p.b();
  Value x = p.read(self, opmath_type(type));
  // Shift by the (real part's) maximum, or by 0 where that is infinite, so exp cannot overflow.
  Value real = hlo::is_complex(x.element()) ? b.complex_parts(x, false) : x;
  Value shift = reduce_extreme(b, real, true, r.dims);
  Value infinite = b.compare(Compare::EQ, unary::abs(b, shift), splat(b, INFINITY, shift));
  shift = b.convert(b.select(infinite, splat(b, 0, shift), shift), x.element());
  Value sum = reduce_sum(
      b, b.unary("exponential", b.binary("subtract", x, unreduce(b, shift, x, r))), r.dims);
  p.write(out, b.reshape(b.binary("add", b.unary("log", sum), shift), r.shape));
  p.run();
  return out;
}

at::Tensor logsumexp(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
  c10::ScalarType type = at::isIntegralType(self.scalar_type(), /*includeBool=*/true)
                             ? c10::typeMetaToScalarType(c10::get_default_dtype())
                             : self.scalar_type();
  at::Tensor out = at::empty({0}, self.options().dtype(type));
  return tpu::aten::logsumexp_out(self, dim, keepdim, out);
}

}  // namespace tpu::aten
