// Elementwise functions built from other StableHLO ops: exp2, erfc, the inverse hyperbolic
// functions and sinc (unary, registered through TPU_UNARY_OPS), and logaddexp, logaddexp2, fmax,
// fmin, hypot and copysign (binary, TPU_BINARY_OPS). Without them each call left the device for
// PyTorch's CPU kernel. The formulas follow what PyTorch's CPU kernels compute, special values
// included (a test compares them over zeros, infinities and NaN).
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <cmath>
#include <limits>

#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"
#include "hlo/arithmetic.h"
#include "hlo/log1p.h"
#include "hlo/trig.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::ElementType;
using hlo::Value;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

using hlo::add;
using hlo::div;
using hlo::horner;
using hlo::mul;
using hlo::sign_bit_set;
using hlo::splat;
using hlo::sub;

Value with_sign_of(Builder& b, const Value& magnitude, const Value& sign) {
  return b.select(sign_bit_set(b, sign), b.unary("negate", magnitude), magnitude);
}

// 2^n for integral-valued n with |n| <= 250 (float32) or 2000 (float64), as two
// factors built from their exponent bits so that neither overflows on the way.
Value power_of_two(Builder& b, const Value& n) {
  const bool wide = n.element() == ElementType::F64;
  const ElementType ints = wide ? ElementType::S64 : ElementType::S32;
  const double bias = wide ? 1023 : 127;
  const int mantissa_bits = wide ? 52 : 23;
  Value half = b.unary("floor", mul(b, n, splat(b, 0.5, n)));
  auto scale = [&](const Value& k) {
    Value biased = b.convert(add(b, k, splat(b, bias, k)), ints);
    Value bits = b.binary("shift_left", biased, splat(b, mantissa_bits, biased));
    return b.bitcast_convert(bits, n.type);
  };
  return mul(b, scale(half), scale(sub(b, n, half)));
}

// exp(-x^2) with x^2 split into an exact part and a small one (Cephes' expx2): the rounding of
// x^2 alone would cost erfc's tail x^2 ULP of relative accuracy.
Value exp_minus_square(Builder& b, const Value& x) {
  Value m = mul(b, b.unary("floor", add(b, mul(b, x, splat(b, 128, x)), splat(b, 0.5, x))),
                splat(b, 1.0 / 128, x));
  Value f = sub(b, x, m);
  Value small = add(b, mul(b, mul(b, splat(b, 2, x), m), f), mul(b, f, f));
  return mul(b, b.unary("exponential", b.unary("negate", mul(b, m, m))),
             b.unary("exponential", b.unary("negate", small)));
}

}  // namespace

namespace unary {

// 2^x as 2^n * e^(f ln 2) with n = round(x) and |f| <= 1/2: within about 1 ULP, where
// exp(x ln 2) would lose |x ln 2| ULP to the rounding of the product. |x| is clamped past the
// range where the result is 0 or inf (NaN passes through the product).
Value exp2(Builder& b, const Value& x) {
  const double limit = x.element() == ElementType::F64 ? 2000 : 250;  // within power_of_two's range
  Value clamped =
      b.binary("minimum", b.binary("maximum", x, splat(b, -limit, x)), splat(b, limit, x));
  Value n = b.unary("round_nearest_even", clamped);
  Value f = sub(b, clamped, n);
  Value fraction = b.unary("exponential", mul(b, f, splat(b, M_LN2, x)));
  return b.select(b.compare(Compare::NE, x, x), x, mul(b, fraction, power_of_two(b, n)));
}

// erfc(x): 1 - erf(x) for |x| <= 1 (x T(x^2) / U(x^2)), and exp(-x^2) P(|x|) / Q(|x|) below 8,
// R(|x|) / S(|x|) above (Cephes' ndtr), reflected as 2 - erfc(-x) for negative x.
Value erfc(Builder& b, const Value& x) {
  Value z = mul(b, x, x);
  Value erf_near =
      div(b,
          mul(b, x,
              horner(b, z,
                     {9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
                      7.00332514112805075473E3, 5.55923013010394962768E4})),
          horner(b, z,
                 {1.0, 3.35617141647503099647E1, 5.21357949780152679795E2, 4.59432382970980127987E3,
                  2.26290000613890934246E4, 4.92673942608635921086E4}));
  Value a = b.unary("abs", x);
  Value c = b.binary("minimum", b.binary("maximum", a, splat(b, 1, x)), splat(b, 27, x));
  Value below_eight =
      div(b,
          horner(b, c,
                 {2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
                  4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
                  9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2}),
          horner(b, c,
                 {1.0, 1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
                  9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
                  1.65666309194161350182E3, 5.57535340817727675546E2}));
  Value above_eight =
      div(b,
          horner(b, c,
                 {5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
                  6.16021097993053585195E0, 7.40974269950448939160E0, 2.97886665372100240670E0}),
          horner(b, c,
                 {1.0, 2.26052863220117276590E0, 9.39603524938001434673E0, 1.20489539808096656605E1,
                  1.70814450747565897222E1, 9.60896809063285878198E0, 3.36907645100081516050E0}));
  Value tail = mul(b, exp_minus_square(b, c),
                   b.select(b.compare(Compare::LT, c, splat(b, 8, x)), below_eight, above_eight));
  Value far =
      b.select(b.compare(Compare::LT, x, splat(b, 0, x)), sub(b, splat(b, 2, x), tail), tail);
  Value near = sub(b, splat(b, 1, x), erf_near);
  // NaN fails the comparison and takes `far`, whose every step carries it.
  return b.select(b.compare(Compare::LE, a, splat(b, 1, x)), near, far);
}

// atanh(x) = sign(x) log1p(2|x| / (1 - |x|)) / 2: exact at +-1 (+-inf), NaN past them, -0
// kept. Working on |x| keeps 1 - |x| exact near 1, where atanh is steepest.
Value atanh(Builder& b, const Value& x) {
  Value a = b.unary("abs", x);
  Value ratio = div(b, mul(b, splat(b, 2, x), a), sub(b, splat(b, 1, x), a));
  return with_sign_of(b, mul(b, hlo::log_plus_one(b, ratio), splat(b, 0.5, x)), x);
}

// asinh(|x|) = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), or log(|x|) + ln 2 above 2^28 (where
// x^2 would overflow), with x's sign.
Value asinh(Builder& b, const Value& x) {
  Value a = b.unary("abs", x);
  Value square = mul(b, a, a);
  Value near = hlo::log_plus_one(
      b,
      add(b, a,
          div(b, square, add(b, splat(b, 1, x), b.unary("sqrt", add(b, splat(b, 1, x), square))))));
  Value large = add(b, b.unary("log", a), splat(b, M_LN2, x));
  Value r = b.select(b.compare(Compare::GT, a, splat(b, 268435456.0, x)), large, near);
  return with_sign_of(b, r, x);
}

// acosh(x) = log1p(t + sqrt(2t + t^2)) with t = x - 1, or log(x) + ln 2 above 2^28; NaN below 1.
Value acosh(Builder& b, const Value& x) {
  Value t = sub(b, x, splat(b, 1, x));
  Value near = hlo::log_plus_one(
      b, add(b, t, b.unary("sqrt", add(b, mul(b, splat(b, 2, x), t), mul(b, t, t)))));
  Value large = add(b, b.unary("log", x), splat(b, M_LN2, x));
  Value r = b.select(b.compare(Compare::GT, x, splat(b, 268435456.0, x)), large, near);
  // Below 1 the formula is not NaN by itself once t^2 overflows or cancels.
  return b.select(b.compare(Compare::LT, x, splat(b, 1, x)), splat(b, std::nan(""), x), r);
}

// sinc(x) = sin(pi x) / (pi x), and 1 at 0, as the CPU computes it.
Value sinc(Builder& b, const Value& x) {
  Value product = mul(b, x, splat(b, M_PI, x));
  Value r = div(b, hlo::sine(b, product), product);
  return b.select(b.compare(Compare::EQ, x, splat(b, 0, x)), splat(b, 1, x), r);
}

}  // namespace unary

namespace binary {

namespace {

// ATen's complex _log_add_exp_helper: with min and max ordered by their real parts,
// log1p(exp(min - max)) + max; NaN + NaN i when either holds a NaN; and where both real parts
// are the same infinity, min for -inf (exp of either is 0) and log(exp(min) + exp(max)) for +inf.
Value complex_logaddexp(Builder& b, const Value& x, const Value& y) {
  auto has_nan = [&](const Value& z) {
    Value re = b.complex_parts(z, false), im = b.complex_parts(z, true);
    return b.binary("or", b.compare(Compare::NE, re, re), b.compare(Compare::NE, im, im));
  };
  Value x_first = b.compare(Compare::LT, b.complex_parts(x, false), b.complex_parts(y, false));
  Value min = b.select(x_first, x, y), max = b.select(x_first, y, x);
  Value min_re = b.complex_parts(min, false), max_re = b.complex_parts(max, false);
  // unary::exp: exp(-inf + i y) must be 0 for an infinite y too (max = inf + inf i).
  Value r = add(b, hlo::log_plus_one(b, unary::exp(b, sub(b, min, max))), max);
  Value both_infinite =
      b.binary("and", b.compare(Compare::EQ, min_re, max_re),
               b.compare(Compare::EQ, b.unary("abs", min_re), splat(b, kInfinity, min_re)));
  Value infinite_sum = b.unary("log", add(b, unary::exp(b, min), unary::exp(b, max)));
  Value negative = b.compare(Compare::LT, min_re, splat(b, 0, min_re));
  r = b.select(both_infinite, b.select(negative, min, infinite_sum), r);
  Value nan = splat(b, std::nan(""), min_re);
  return b.select(b.binary("or", has_nan(x), has_nan(y)), b.make_complex(nan, nan), r);
}

}  // namespace

// max(a, b) + log1p(exp(-|a - b|)), and a itself when both are the same infinity.
Value logaddexp(Builder& b, const Value& x, const Value& y) {
  if (hlo::is_complex(x.element())) return complex_logaddexp(b, x, y);
  Value m = b.binary("maximum", x, y);
  Value r = add(b, m,
                hlo::log_plus_one(
                    b, b.unary("exponential", b.unary("negate", b.unary("abs", sub(b, x, y))))));
  Value same_infinity = b.binary("and", b.compare(Compare::EQ, x, y),
                                 b.compare(Compare::EQ, b.unary("abs", x), splat(b, kInfinity, x)));
  return b.select(same_infinity, x, r);
}

// max(a, b) + log1p(2^-|a - b|) / ln 2, and a itself when both are the same infinity.
Value logaddexp2(Builder& b, const Value& x, const Value& y) {
  Value m = b.binary("maximum", x, y);
  Value power = unary::exp2(b, b.unary("negate", b.unary("abs", sub(b, x, y))));
  Value r = add(b, m, mul(b, hlo::log_plus_one(b, power), splat(b, 1 / M_LN2, x)));
  Value same_infinity = b.binary("and", b.compare(Compare::EQ, x, y),
                                 b.compare(Compare::EQ, b.unary("abs", x), splat(b, kInfinity, x)));
  return b.select(same_infinity, x, r);
}

// The larger (smaller) of a and b, ignoring a NaN unless both are NaN.
Value fmax(Builder& b, const Value& x, const Value& y) {
  if (!hlo::is_float(x.element())) return b.binary("maximum", x, y);
  Value r = b.binary("maximum", x, y);
  r = b.select(b.compare(Compare::NE, x, x), y, r);
  return b.select(b.compare(Compare::NE, y, y), x, r);
}
Value fmin(Builder& b, const Value& x, const Value& y) {
  if (!hlo::is_float(x.element())) return b.binary("minimum", x, y);
  Value r = b.binary("minimum", x, y);
  r = b.select(b.compare(Compare::NE, x, x), y, r);
  return b.select(b.compare(Compare::NE, y, y), x, r);
}

// sqrt(a^2 + b^2) without overflow: m sqrt(1 + (n / m)^2) for m = max(|a|, |b|), n the other;
// an infinite operand gives inf even beside a NaN, as std::hypot does.
Value hypot(Builder& b, const Value& x, const Value& y) {
  Value ax = b.unary("abs", x), ay = b.unary("abs", y);
  Value m = b.binary("maximum", ax, ay), n = b.binary("minimum", ax, ay);
  Value ratio = div(b, n, m);
  Value r = mul(b, m, b.unary("sqrt", add(b, splat(b, 1, x), mul(b, ratio, ratio))));
  r = b.select(b.compare(Compare::EQ, m, splat(b, 0, x)), m, r);
  Value infinity = splat(b, kInfinity, x);
  Value infinite =
      b.binary("or", b.compare(Compare::EQ, ax, infinity), b.compare(Compare::EQ, ay, infinity));
  return b.select(infinite, infinity, r);
}

// The next representable value after a toward b (C's nextafter), by stepping a's bits: computed
// in a's own dtype, half types included. 0 steps to the smallest subnormal with b's sign.
Value nextafter(Builder& b, const Value& x, const Value& y) {
  const int64_t bytes = hlo::byte_size(x.element());
  const ElementType ints = bytes == 8   ? ElementType::S64
                           : bytes == 4 ? ElementType::S32
                                        : ElementType::S16;
  const hlo::TensorType int_type{ints, x.dims()};
  Value bits = b.bitcast_convert(x, int_type);
  Value up =
      b.binary("xor", b.compare(Compare::GT, y, x), b.compare(Compare::LT, x, splat(b, 0, x)));
  Value stepped = b.bitcast_convert(
      b.select(up, add(b, bits, splat(b, 1, bits)), sub(b, bits, splat(b, 1, bits))), x.type);
  // The smallest subnormal's bits are 1; with the sign bit set (built by a shift: -2^63 + 1
  // is not a double) for a negative direction.
  Value one = splat(b, 1, bits);
  Value negative_one_ulp = b.binary(
      "or", b.binary("shift_left", one, splat(b, static_cast<double>(bytes * 8 - 1), bits)), one);
  Value smallest = b.bitcast_convert(
      b.select(b.compare(Compare::LT, y, splat(b, 0, y)), negative_one_ulp, one), x.type);
  Value r = b.select(b.compare(Compare::EQ, x, splat(b, 0, x)), smallest, stepped);
  r = b.select(b.compare(Compare::EQ, x, y), y, r);
  Value nan = b.binary("or", b.compare(Compare::NE, x, x), b.compare(Compare::NE, y, y));
  return b.select(nan, add(b, x, y), r);
}

// x log1p(y), 0 where x is 0, NaN where y is NaN (the CPU's order of the two rules).
Value xlog1py(Builder& b, const Value& x, const Value& y) {
  Value r = b.select(b.compare(Compare::EQ, x, splat(b, 0, x)), splat(b, 0, x),
                     mul(b, x, hlo::log_plus_one(b, y)));
  return b.select(b.compare(Compare::NE, y, y), y, r);
}

// |a| with the sign bit of b (NaN's included).
Value copysign(Builder& b, const Value& x, const Value& y) {
  return with_sign_of(b, b.unary("abs", x), y);
}

}  // namespace binary

// ---- signbit, frac, logit, heaviside: ops with their own dtype rules -------------------------

namespace {

// One elementwise program `name` from `inputs` (read as `compute`) into `out`, prepared, with
// `scalars` as run-time operands and `statics` in the signature.
template <typename Body>
void elementwise(const char* name, std::initializer_list<const at::Tensor*> inputs,
                 const at::Tensor& out, c10::ScalarType compute,
                 std::initializer_list<const c10::Scalar*> scalars, int64_t variant,
                 const Body& body) {
  std::vector<const at::Tensor*> tensors(inputs);
  tensors.push_back(&out);
  PreparedCall call(name, tensors, scalars, {static_cast<int64_t>(compute), variant});
  if (call.run()) return;
  Program p(name, &call);
  std::vector<Value> values;
  for (const at::Tensor* t : inputs) values.push_back(p.read(*t, compute));
  std::vector<Value> scalar_values;
  for (const c10::Scalar* s : scalars) {
    if (s != nullptr) scalar_values.push_back(p.scalar(*s, compute));
  }
  p.write(out, body(p.b(), values, scalar_values));
  p.run();
}

c10::ScalarType opmath(c10::ScalarType t) {
  return t == c10::kHalf || t == c10::kBFloat16 ? c10::kFloat : t;
}

void signbit_into(const char* name, const at::Tensor& self, const at::Tensor& out) {
  elementwise(name, {&self}, out, opmath(self.scalar_type()), {}, 0,
              [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
                const Value& x = in[0];
                if (hlo::is_float(x.element())) return sign_bit_set(b, x);
                if (x.element() == ElementType::Pred || !hlo::is_signed_int(x.element())) {
                  return b.broadcast_to(b.constant(0, ElementType::Pred), x.dims());
                }
                return b.compare(Compare::LT, x, splat(b, 0, x));
              });
}

void check_frac(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"frac_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
}

void frac_into(const char* name, const at::Tensor& self, const at::Tensor& out) {
  elementwise(name, {&self}, out, opmath(self.scalar_type()), {}, 0,
              [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
                const Value& x = in[0];
                Value whole = b.select(b.compare(Compare::LT, x, splat(b, 0, x)),
                                       b.unary("ceil", x), b.unary("floor", x));
                return sub(b, x, whole);
              });
}

// logit in the default float dtype for integer inputs, as the CPU computes it.
c10::ScalarType logit_type(const at::Tensor& self) {
  return c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)
             ? c10::typeMetaToScalarType(c10::get_default_dtype())
             : self.scalar_type();
}

void logit_into(const char* name, const at::Tensor& self, std::optional<double> eps,
                const at::Tensor& out) {
  const c10::Scalar eps_value(eps.value_or(0.0));
  elementwise(name, {&self}, out, opmath(logit_type(self)), {eps ? &eps_value : nullptr},
              eps.has_value(),
              [&](Builder& b, const std::vector<Value>& in, const std::vector<Value>& scalars) {
                Value x = in[0];
                if (!scalars.empty()) {  // clamp to [eps, 1 - eps] (NaN stays NaN)
                  Value low = b.broadcast_to(scalars[0], x.dims());
                  Value high = sub(b, splat(b, 1, x), low);
                  Value clamped = b.binary("minimum", b.binary("maximum", x, low), high);
                  x = b.select(b.compare(Compare::NE, x, x), x, clamped);
                }
                return b.unary("log", div(b, x, sub(b, splat(b, 1, x), x)));
              });
}

void check_heaviside(const at::Tensor& self, const at::Tensor& values) {
  TORCH_CHECK(!self.is_complex() && !values.is_complex(),
              "heaviside is not yet implemented for complex tensors.");
  TORCH_CHECK(self.scalar_type() == values.scalar_type(),
              "heaviside is not yet implemented for tensors with different dtypes.");
}

void heaviside_into(const char* name, const at::Tensor& self, const at::Tensor& values,
                    const at::Tensor& out) {
  const std::vector<int64_t> shape = out.sizes().vec();
  elementwise(name, {&self, &values}, out, self.scalar_type(), {}, 0,
              [&](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
                Value x = b.broadcast_to(in[0], shape), v = b.broadcast_to(in[1], shape);
                Value positive = b.compare(Compare::GT, x, splat(b, 0, x));
                Value step = b.select(positive, splat(b, 1, x), splat(b, 0, x));
                return b.select(b.compare(Compare::EQ, x, splat(b, 0, x)), v, step);
              });
}

}  // namespace

at::Tensor signbit(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(c10::kBool));
  signbit_into("aten::signbit", self, out);
  return out;
}
at::Tensor& signbit_out(const at::Tensor& self, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  signbit_into("aten::signbit.out", self, out);
  return out;
}

at::Tensor frac(const at::Tensor& self) {
  check_frac(self);
  at::Tensor out = at::empty_like(self);
  frac_into("aten::frac", self, out);
  return out;
}
at::Tensor& frac_(at::Tensor& self) {
  check_frac(self);
  at::assert_no_internal_overlap(self);
  frac_into("aten::frac_", self, self);
  return self;
}
at::Tensor& frac_out(const at::Tensor& self, at::Tensor& out) {
  check_frac(self);
  at::native::resize_output(out, self.sizes());
  frac_into("aten::frac.out", self, out);
  return out;
}

at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  at::Tensor out = at::empty_like(self, self.options().dtype(logit_type(self)));
  logit_into("aten::logit", self, eps, out);
  return out;
}
at::Tensor& logit_(at::Tensor& self, std::optional<double> eps) {
  TORCH_CHECK(at::canCast(logit_type(self), self.scalar_type()), "result type ", logit_type(self),
              " can't be cast to the desired output type ", self.scalar_type());
  at::assert_no_internal_overlap(self);
  logit_into("aten::logit_", self, eps, self);
  return self;
}
at::Tensor& logit_out(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  at::native::resize_output(out, self.sizes());
  logit_into("aten::logit.out", self, eps, out);
  return out;
}

at::Tensor heaviside(const at::Tensor& self, const at::Tensor& values) {
  check_heaviside(self, values);
  at::Tensor out = at::empty(at::infer_size(self.sizes(), values.sizes()), self.options());
  heaviside_into("aten::heaviside", self, values, out);
  return out;
}
at::Tensor& heaviside_(at::Tensor& self, const at::Tensor& values) {
  check_heaviside(self, values);
  TORCH_CHECK(at::infer_size(self.sizes(), values.sizes()) == self.sizes().vec(),
              "output with shape ", self.sizes(), " doesn't match the broadcast shape ",
              at::infer_size(self.sizes(), values.sizes()));
  at::assert_no_internal_overlap(self);
  heaviside_into("aten::heaviside_", self, values, self);
  return self;
}
at::Tensor& heaviside_out(const at::Tensor& self, const at::Tensor& values, at::Tensor& out) {
  check_heaviside(self, values);
  at::native::resize_output(out, at::infer_size(self.sizes(), values.sizes()));
  heaviside_into("aten::heaviside.out", self, values, out);
  return out;
}

}  // namespace tpu::aten
