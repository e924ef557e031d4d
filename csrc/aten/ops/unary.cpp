// Unary elementwise math. Each op is one lowering function; the functional,
// in-place and out= kernels are generated from it (see TPU_UNARY_OPS in ops.h).
#include <ATen/MemoryOverlap.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log.h>
#include <ATen/ops/log1p.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/real.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/where.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"
#include "hlo/log1p.h"
#include "hlo/trig.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Value;

Value splat(Builder& b, double v, const Value& like) {
  return b.broadcast_to(b.constant(v, like.element()), like.dims());
}

bool is_integral(const Value& x) {
  return !hlo::is_float(x.element()) && !hlo::is_complex(x.element());
}

// Integer rounding is the identity.
Value round_like(Builder& b, const char* op, const Value& x) {
  return is_integral(x) ? x : b.unary(op, x);
}

}  // namespace

namespace unary {

namespace {

// |z| = sqrt(re^2 + im^2), the CPU's value to the bit for moderate parts. Where a square would
// overflow (float32 from |z| = 2^64 on) or lose its bits to underflow, both parts are first
// scaled by a power of two, which is exact, and the root scaled back. An infinite part gives
// inf even beside a NaN, as std::hypot does.
Value complex_magnitude(Builder& b, const Value& z) {
  Value re = b.complex_parts(z, false), im = b.complex_parts(z, true);
  const bool wide = re.element() == hlo::ElementType::F64;
  auto root_of_squares = [&](int exponent) {  // sqrt((re 2^e)^2 + (im 2^e)^2) 2^-e
    Value x = b.binary("multiply", re, splat(b, std::ldexp(1.0, exponent), re));
    Value y = b.binary("multiply", im, splat(b, std::ldexp(1.0, exponent), im));
    Value r =
        b.unary("sqrt", b.binary("add", b.binary("multiply", x, x), b.binary("multiply", y, y)));
    return exponent == 0 ? r : b.binary("multiply", r, splat(b, std::ldexp(1.0, -exponent), r));
  };
  const int safe = wide ? 500 : 60;  // parts below 2^safe (and above 2^-safe) square safely
  Value ax = b.unary("abs", re), ay = b.unary("abs", im);
  Value m = b.binary("maximum", ax, ay);
  Value r = b.select(b.compare(hlo::Compare::GT, m, splat(b, std::ldexp(1.0, safe), m)),
                     root_of_squares(wide ? -600 : -80), root_of_squares(0));
  r = b.select(b.compare(hlo::Compare::LT, m, splat(b, std::ldexp(1.0, -safe), m)),
               root_of_squares(wide ? 600 : 100), r);
  Value infinity = splat(b, INFINITY, m);
  Value infinite = b.binary("or", b.compare(hlo::Compare::EQ, ax, infinity),
                            b.compare(hlo::Compare::EQ, ay, infinity));
  return b.select(infinite, infinity, r);
}

}  // namespace

Value abs(Builder& b, const Value& x) {
  if (hlo::is_complex(x.element())) return complex_magnitude(b, x);  // a real number
  return x.element() == hlo::ElementType::Pred || hlo::is_unsigned_int(x.element())
             ? x
             : b.unary("abs", x);
}
Value neg(Builder& b, const Value& x) { return b.unary("negate", x); }
Value ceil(Builder& b, const Value& x) { return round_like(b, "ceil", x); }
Value floor(Builder& b, const Value& x) { return round_like(b, "floor", x); }
Value round(Builder& b, const Value& x) { return round_like(b, "round_nearest_even", x); }
Value trunc(Builder& b, const Value& x) {
  if (is_integral(x)) return x;
  return b.select(b.compare(hlo::Compare::LT, x, splat(b, 0, x)), b.unary("ceil", x),
                  b.unary("floor", x));
}
Value sign(Builder& b, const Value& x) {
  if (x.element() == hlo::ElementType::Pred) return x;
  if (hlo::is_unsigned_int(x.element())) {  // stablehlo.sign takes no unsigned integers
    return b.convert(b.compare(hlo::Compare::NE, x, splat(b, 0, x)), x.element());
  }
  return b.unary("sign", x);
}
// sign for real numbers; x / |x| (0 at 0) for complex ones, each part divided by the real |x|
// (a complex division would square |x| and overflow for large x).
Value sgn(Builder& b, const Value& x) {
  if (!hlo::is_complex(x.element())) return sign(b, x);
  Value magnitude = abs(b, x);
  Value re = b.binary("divide", b.complex_parts(x, false), magnitude);
  Value im = b.binary("divide", b.complex_parts(x, true), magnitude);
  Value zero = splat(b, 0, magnitude);
  Value at_zero = b.compare(hlo::Compare::EQ, magnitude, zero);
  return b.make_complex(b.select(at_zero, zero, re), b.select(at_zero, zero, im));
}
// exp(-inf + i y) is 0 for every y, as C's cexp and the CPU have it; XLA's exp(re) * cis(im)
// makes 0 * NaN = NaN of it where y is infinite or NaN.
Value exp(Builder& b, const Value& x) {
  Value e = b.unary("exponential", x);
  if (!hlo::is_complex(x.element())) return e;
  Value re = b.complex_parts(x, false);
  Value zero = splat(b, 0, re);
  Value vanishes = b.compare(hlo::Compare::EQ, re, splat(b, -INFINITY, re));
  return b.select(vanishes, b.make_complex(zero, zero), e);
}
Value expm1(Builder& b, const Value& x) { return b.unary("exponential_minus_one", x); }
Value log(Builder& b, const Value& x) { return b.unary("log", x); }
Value log1p(Builder& b, const Value& x) { return hlo::log_plus_one(b, x); }
Value log2(Builder& b, const Value& x) {
  return b.binary("divide", b.unary("log", x), splat(b, std::log(2.0), x));
}
Value log10(Builder& b, const Value& x) {
  return b.binary("divide", b.unary("log", x), splat(b, std::log(10.0), x));
}
Value sqrt(Builder& b, const Value& x) { return b.unary("sqrt", x); }
Value rsqrt(Builder& b, const Value& x) { return b.unary("rsqrt", x); }
Value reciprocal(Builder& b, const Value& x) { return b.binary("divide", splat(b, 1, x), x); }
Value sin(Builder& b, const Value& x) { return hlo::sine(b, x); }
Value cos(Builder& b, const Value& x) { return hlo::cosine(b, x); }
Value tan(Builder& b, const Value& x) { return hlo::tangent(b, x); }
Value tanh(Builder& b, const Value& x) { return b.unary("tanh", x); }
Value sigmoid(Builder& b, const Value& x) { return b.unary("logistic", x); }
Value atan(Builder& b, const Value& x) { return hlo::arctangent2(b, x, splat(b, 1, x)); }
// sqrt(1 - x^2) as sqrt((1 - x)(1 + x)), which keeps its precision as |x| nears 1.
Value cosine_of_arcsine(Builder& b, const Value& x) {
  return b.unary("sqrt", b.binary("multiply", b.binary("subtract", splat(b, 1, x), x),
                                  b.binary("add", splat(b, 1, x), x)));
}
Value asin(Builder& b, const Value& x) { return hlo::arctangent2(b, x, cosine_of_arcsine(b, x)); }
Value acos(Builder& b, const Value& x) { return hlo::arctangent2(b, cosine_of_arcsine(b, x), x); }
namespace {

// c[0] * x^(n-1) + ... + c[n-1], and with a leading 1 when `monic` (Horner's rule).
Value polynomial(Builder& b, const Value& x, const double* c, size_t n, bool monic) {
  Value r = splat(b, monic ? 1 : c[0], x);
  for (size_t i = monic ? 0 : 1; i < n; ++i) {
    r = b.binary("add", b.binary("multiply", r, x), splat(b, c[i], x));
  }
  return r;
}

// float64 erf within 1e-15 relative: x T(x^2) / U(x^2) for |x| <= 1, else
// sign(x) (1 - exp(-x^2) P(|x|) / Q(|x|)) with |x| clamped to 8 (erfc(8) is below 2^-53), the
// rational approximations of Cephes' ndtr.
Value erf_f64(Builder& b, const Value& x) {
  static const double kT[] = {9.60497373987051638749E0, 9.00260197203842689217E1,
                              2.23200534594684319226E3, 7.00332514112805075473E3,
                              5.55923013010394962768E4};
  static const double kU[] = {3.35617141647503099647E1, 5.21357949780152679795E2,
                              4.59432382970980127987E3, 2.26290000613890934246E4,
                              4.92673942608635921086E4};
  static const double kP[] = {
      2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
      4.86371970985681366614E1,   1.96520832956077098242E2,  5.26445194995477358631E2,
      9.34528527171957607540E2,   1.02755188689515710272E3,  5.57535335369399327526E2};
  static const double kQ[] = {1.32281951154744992508E1, 8.67072140885989742329E1,
                              3.54937778887819891062E2, 9.75708501743205489753E2,
                              1.82390916687909736289E3, 2.24633760818710981792E3,
                              1.65666309194161350182E3, 5.57535340817727675546E2};
  Value z = b.binary("multiply", x, x);
  Value near = b.binary("divide", b.binary("multiply", x, polynomial(b, z, kT, 5, false)),
                        polynomial(b, z, kU, 5, true));
  Value a = b.unary("abs", x);
  Value c = b.binary("minimum", b.binary("maximum", a, splat(b, 1, x)), splat(b, 8, x));
  Value tail =
      b.binary("multiply", b.unary("exponential", b.unary("negate", b.binary("multiply", c, c))),
               b.binary("divide", polynomial(b, c, kP, 9, false), polynomial(b, c, kQ, 8, true)));
  Value far = b.binary("multiply", b.unary("sign", x), b.binary("subtract", splat(b, 1, x), tail));
  return b.select(b.compare(hlo::Compare::LE, a, splat(b, 1, x)), near, far);
}

}  // namespace

// erf(x) = x * P(x^2) / Q(x^2) on [-4, 4] (clamped outside), the rational approximation XLA
// and Eigen use for float32 (about 4e-7 absolute error); float64 takes erf_f64.
Value erf(Builder& b, const Value& x) {
  if (x.element() == hlo::ElementType::F64) return erf_f64(b, x);
  static const double kP[] = {-2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06,
                              -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                              -1.60960333262415e-02};
  static const double kQ[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                              -7.37332916720468e-03, -1.42647390514189e-02};
  Value c = b.binary("minimum", b.binary("maximum", x, splat(b, -4, x)), splat(b, 4, x));
  Value c2 = b.binary("multiply", c, c);
  Value p = splat(b, kP[0], x);
  for (size_t i = 1; i < 7; ++i)
    p = b.binary("add", b.binary("multiply", p, c2), splat(b, kP[i], x));
  Value q = splat(b, kQ[0], x);
  for (size_t i = 1; i < 5; ++i)
    q = b.binary("add", b.binary("multiply", q, c2), splat(b, kQ[i], x));
  return b.binary("divide", b.binary("multiply", c, p), q);
}

Value sinh(Builder& b, const Value& x) {
  Value e = b.unary("exponential_minus_one", x);
  Value f = b.unary("exponential_minus_one", b.unary("negate", x));
  return b.binary("multiply", b.binary("subtract", e, f), splat(b, 0.5, x));
}
Value cosh(Builder& b, const Value& x) {
  Value e = b.unary("exponential", x);
  Value f = b.unary("exponential", b.unary("negate", x));
  return b.binary("multiply", b.binary("add", e, f), splat(b, 0.5, x));
}

}  // namespace unary

namespace {

// Integer and bool inputs of "float" ops compute in the default float dtype, as
// PyTorch's unary float ops do; other ops keep the input dtype.
c10::ScalarType unary_result_type(const at::Tensor& self, bool float_op, UnaryLowering lowering) {
  if (lowering == &unary::abs && c10::isComplexType(self.scalar_type())) {
    return c10::toRealValueType(self.scalar_type());
  }
  if (float_op && c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    return c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  return self.scalar_type();
}

at::Tensor like(const at::Tensor& self, c10::ScalarType type) { return new_empty_like(self, type); }

}  // namespace

namespace {

// Complex inputs: the ops the CPU refuses raise its error (XLA fails to compile them, and
// aborts the process on a complex erf), and exp2, sinc and the inverse hyperbolic
// functions, which XLA has no complex form of, are composed of complex ops it has.
// Returns whether `out` holds the result.
bool complex_composite(UnaryLowering lowering, const at::Tensor& self, const at::Tensor& out) {
  if (!self.is_complex()) return false;
  const char* type = c10::toString(self.scalar_type());
  for (auto [refused, what] : {std::pair{&unary::floor, "floor"}, std::pair{&unary::ceil, "ceil"},
                               std::pair{&unary::trunc, "trunc"}}) {
    TORCH_CHECK_NOT_IMPLEMENTED(lowering != refused, what, " is not supported for complex inputs");
  }
  for (auto [refused, kernel] :
       {std::pair{&unary::round, "round_vml_cpu"}, std::pair{&unary::erf, "erf_vml_cpu"},
        std::pair{&unary::erfc, "erfc_vml_cpu"}}) {
    TORCH_CHECK_NOT_IMPLEMENTED(lowering != refused, "\"", kernel, "\" not implemented for '", type,
                                "'");
  }
  TORCH_CHECK_NOT_IMPLEMENTED(lowering != &unary::sign,
                              "Unlike NumPy, torch.sign is not intended to support complex "
                              "numbers. Please use torch.sgn instead.");
  const at::Tensor& z = self;
  at::Tensor result;
  if (lowering == &unary::exp2) {
    result = at::exp(z * std::log(2.0));
  } else if (lowering == &unary::sinc) {
    at::Tensor pi_z = z * M_PI;
    result = at::where(z == 0, at::ones_like(z), at::sin(pi_z) / pi_z);
  } else if (lowering == &unary::asinh) {
    // log(w + sqrt(w^2 + 1)) on the half plane Re(w) >= 0, where nothing cancels; odd.
    at::Tensor flip = at::real(z) < 0;
    at::Tensor w = at::where(flip, -z, z);
    at::Tensor r = at::log(w + at::sqrt(w * w + 1));
    result = at::where(flip, -r, r);
  } else if (lowering == &unary::acosh) {
    result = at::log(z + at::sqrt(z + 1) * at::sqrt(z - 1));
  } else if (lowering == &unary::atanh) {
    result = (at::log1p(z) - at::log1p(-z)) * 0.5;
  } else {
    return false;
  }
  out.copy_(result);
  return true;
}

}  // namespace

void lower_unary(const char* name, UnaryLowering lowering, bool float_op, const at::Tensor& self,
                 const at::Tensor& out) {
  if (complex_composite(lowering, self, out)) return;
  c10::ScalarType compute = unary_result_type(self, float_op, lowering);
  if (c10::isComplexType(self.scalar_type())) compute = self.scalar_type();
  // Half-precision math runs in float32 and rounds once, as PyTorch's CPU kernels do.
  c10::ScalarType wide = compute == c10::kHalf || compute == c10::kBFloat16 ? c10::kFloat : compute;
  PreparedCall call(name, {&self, &out}, {},
                    {reinterpret_cast<int64_t>(lowering), float_op, static_cast<int64_t>(compute)});
  if (call.run()) return;
  Program p(name, &call);
  p.write(out, lowering(p.b(), p.read(self, float_op ? wide : compute)));
  p.run();
}

at::Tensor unary_functional(const char* name, UnaryLowering lowering, bool float_op,
                            const at::Tensor& self) {
  at::Tensor out = like(self, unary_result_type(self, float_op, lowering));
  lower_unary(name, lowering, float_op, self, out);
  return out;
}

at::Tensor& unary_in_place(const char* name, UnaryLowering lowering, bool float_op,
                           at::Tensor& self) {
  // |z| is real: PyTorch refuses to write it into the complex input.
  TORCH_CHECK(!(self.is_complex() && std::strcmp(name, "aten::abs_") == 0),
              "In-place abs is not supported for complex tensors.");
  c10::ScalarType type = unary_result_type(self, float_op, lowering);
  TORCH_CHECK(at::canCast(type, self.scalar_type()), "result type ", type,
              " can't be cast to the desired output type ", self.scalar_type());
  at::assert_no_internal_overlap(self);
  lower_unary(name, lowering, float_op, self, self);
  return self;
}

at::Tensor& unary_out(const char* name, UnaryLowering lowering, bool float_op,
                      const at::Tensor& self, at::Tensor& out) {
  c10::ScalarType type = unary_result_type(self, float_op, lowering);
  TORCH_CHECK(at::canCast(type, out.scalar_type()), "result type ", type,
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, self.sizes());
  at::assert_no_internal_overlap(out);
  at::assert_no_partial_overlap(out, self);
  lower_unary(name, lowering, float_op, self, out);
  return out;
}

namespace {

enum class Test { NegInf, PosInf, Not };

// A bool-valued test of each element, written into `out` (any dtype, as PyTorch allows).
void lower_test(const char* name, Test test, const at::Tensor& self, const at::Tensor& out) {
  Program p(name);
  Builder& b = p.b();
  Value x = p.read(self);
  Value result;
  if (test == Test::Not) {
    result = x.element() == hlo::ElementType::Pred ? b.unary("not", x)
                                                   : b.compare(hlo::Compare::EQ, x, splat(b, 0, x));
  } else if (!hlo::is_float(x.element())) {
    result = b.broadcast_to(b.constant(0, hlo::ElementType::Pred), x.dims());
  } else {
    double infinity = test == Test::PosInf ? INFINITY : -INFINITY;
    result = b.compare(hlo::Compare::EQ, x, splat(b, infinity, x));
  }
  p.write(out, result);
  p.run();
}

at::Tensor bool_result(const at::Tensor& self) {
  return new_empty(self.sizes(), self.options().dtype(c10::kBool));
}

at::Tensor& bool_out(const at::Tensor& self, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  return out;
}

void check_integral(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isIntegralType(self.scalar_type(), /*includeBool=*/true),
                              "\"bitwise_not_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
}

void lower_bitwise_not(const at::Tensor& self, const at::Tensor& out) {
  Program p("aten::bitwise_not");
  p.write(out, p.b().unary("not", p.read(self)));
  p.run();
}

}  // namespace

at::Tensor isneginf(const at::Tensor& self) {
  at::Tensor out = bool_result(self);
  lower_test("aten::isneginf", Test::NegInf, self, out);
  return out;
}
at::Tensor& isneginf_out(const at::Tensor& self, at::Tensor& out) {
  lower_test("aten::isneginf.out", Test::NegInf, self, bool_out(self, out));
  return out;
}
at::Tensor isposinf(const at::Tensor& self) {
  at::Tensor out = bool_result(self);
  lower_test("aten::isposinf", Test::PosInf, self, out);
  return out;
}
at::Tensor& isposinf_out(const at::Tensor& self, at::Tensor& out) {
  lower_test("aten::isposinf.out", Test::PosInf, self, bool_out(self, out));
  return out;
}
at::Tensor logical_not(const at::Tensor& self) {
  at::Tensor out = bool_result(self);
  lower_test("aten::logical_not", Test::Not, self, out);
  return out;
}
at::Tensor& logical_not_(at::Tensor& self) {
  at::assert_no_internal_overlap(self);
  lower_test("aten::logical_not_", Test::Not, self, self);
  return self;
}
at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  lower_test("aten::logical_not.out", Test::Not, self, bool_out(self, out));
  return out;
}
at::Tensor bitwise_not(const at::Tensor& self) {
  check_integral(self);
  at::Tensor out = new_empty(self.sizes(), self.options());
  lower_bitwise_not(self, out);
  return out;
}
at::Tensor& bitwise_not_(at::Tensor& self) {
  check_integral(self);
  at::assert_no_internal_overlap(self);
  lower_bitwise_not(self, self);
  return self;
}
at::Tensor& bitwise_not_out(const at::Tensor& self, at::Tensor& out) {
  check_integral(self);
  at::native::resize_output(out, self.sizes());
  lower_bitwise_not(self, out);
  return out;
}

}  // namespace tpu::aten
