#include "trig.h"

#include <limits>
#include <vector>

#include "arithmetic.h"

namespace tpu::hlo {

namespace {

enum class Function { Sine, Cosine, Tangent };

// sin, cos or tan of a float32 x with |x| below the exact bound (larger values lose accuracy).
Value polynomial(Builder& b, const Value& x, Function function) {
  const bool cosine = function == Function::Cosine;
  const TensorType ints{ElementType::S32, x.dims()};
  Value ax = b.unary("abs", x);
  // k = the integer nearest to |x| / (pi/2); r = |x| - k pi/2 in about [-pi/4, pi/4], with pi/2
  // split into four parts so that the leading products with k are exact in float32.
  Value k = b.unary("round_nearest_even", mul(b, ax, splat(b, 0.636619746685028076171875, x)));
  Value r = ax;
  for (double part : {-1.5703125, -0.000483989715576171875, 1.62865035235881805419921875e-07,
                      5.5644315544167710640977020375430583953857421875e-11}) {
    r = add(b, r, mul(b, k, splat(b, part, x)));
  }
  Value r2 = mul(b, r, r);
  Value cos_r =
      horner(b, r2,
             {2.4372266125283204019069671630859375e-05, -0.00138865201734006404876708984375,
              0.041666619479656219482421875, -0.5, 1.0});
  Value sin_r = horner(
      b, r2,
      {-0.0001959234114083702898469196984621021329, 0.0083326873655616851693794799871284340042,
       -0.1666666203982298255503735617821803316474});
  sin_r = add(b, mul(b, mul(b, sin_r, r2), r), r);

  // The quadrant k mod 4 picks the polynomial and the sign: sin(r + k pi/2) is sin r, cos r,
  // -sin r, -cos r for k = 0, 1, 2, 3; cos(r + k pi/2) is sin(r + (k + 1) pi/2).
  // tan(r + k pi/2) is tan r for even k and -1 / tan r for odd k.
  Value quadrant = b.convert(k, ElementType::S32);
  if (cosine) quadrant = add(b, quadrant, splat(b, 1, quadrant));
  Value zero = splat(b, 0, quadrant);
  Value odd = b.compare(Compare::NE, b.binary("and", quadrant, splat(b, 1, quadrant)), zero);
  Value negative =
      function == Function::Tangent
          ? odd
          : b.compare(Compare::NE, b.binary("and", quadrant, splat(b, 2, quadrant)), zero);
  if (!cosine) {  // sin and tan are odd functions, -0 included: x's sign bit flips the result
    Value sign_bit = b.compare(Compare::LT, b.bitcast_convert(x, ints), zero);
    negative = b.binary("xor", negative, sign_bit);
  }
  Value value = function == Function::Tangent ? b.select(odd, b.binary("divide", cos_r, sin_r),
                                                         b.binary("divide", sin_r, cos_r))
                                              : b.select(odd, cos_r, sin_r);
  return b.select(negative, b.unary("negate", value), value);
}

Value guarded(Builder& b, const Value& x, Function function) {
  const char* exact = function == Function::Sine     ? "sine"
                      : function == Function::Cosine ? "cosine"
                                                     : "tan";
  if (!b.for_xla_cpu() || x.element() != ElementType::F32 ||
      x.type.num_elements() < kVectorTrigMinElements) {
    return b.unary(exact, x);
  }
  // Whether any |x| (infinities included) is past the polynomial's range. NaN compares false
  // and stays NaN through the polynomial, so the decision never depends on how maximum
  // treats NaN.
  std::vector<int64_t> all(x.rank());
  for (int64_t d = 0; d < x.rank(); ++d) all[d] = d;
  Value bound = splat(b, function == Function::Sine ? kSineExactBelow : kCosineExactBelow, x);
  Value beyond = b.reduce(b.compare(Compare::GE, b.unary("abs", x), bound),
                          b.constant(0, ElementType::Pred), Reduction::Or, all);
  // XLA turns a conditional whose branches hold only elementwise ops into a select that computes
  // both; the barrier (not elementwise) keeps libm's branch from running on every input.
  return b.if_else(
      beyond, {x.type},
      [&](Builder& t) { return std::vector<Value>{t.optimization_barrier(t.unary(exact, x))}; },
      [&](Builder& f) { return std::vector<Value>{polynomial(f, x, function)}; })[0];
}

// atan2 for float32 from one polynomial: t = min(|x|, |y|) / max(|x|, |y|) in [0, 1], atan(t)
// by Cephes' atanf (a second reduction above tan(pi/8)), then the octant and y's sign.
Value polynomial_atan2(Builder& b, const Value& y, const Value& x) {
  const double kPi = 3.14159265358979323846;
  Value ax = b.unary("abs", x), ay = b.unary("abs", y);
  Value hi = b.binary("maximum", ax, ay), lo = b.binary("minimum", ax, ay);
  Value t = b.binary("divide", lo, hi);
  // 0 / 0 (both zero) and inf / inf (both infinite) have the IEEE values of t = 0 and t = 1;
  // NaN inputs keep t NaN, which every later step carries through.
  t = b.select(b.compare(Compare::EQ, hi, splat(b, 0, x)), splat(b, 0, x), t);
  Value infinity = splat(b, std::numeric_limits<double>::infinity(), x);
  Value both_infinite =
      b.binary("and", b.compare(Compare::EQ, ax, infinity), b.compare(Compare::EQ, ay, infinity));
  t = b.select(both_infinite, splat(b, 1, x), t);
  Value above = b.compare(Compare::GT, t, splat(b, 0.4142135623730950, x));
  Value u = b.select(
      above, b.binary("divide", b.binary("subtract", t, splat(b, 1, x)), add(b, t, splat(b, 1, x))),
      t);
  Value z = mul(b, u, u);
  Value p =
      horner(b, z, {8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1});
  Value r = add(b, mul(b, mul(b, p, z), u), u);
  r = add(b, r, b.select(above, splat(b, kPi / 4, x), splat(b, 0, x)));
  // Octant: |y| > |x| mirrors about pi/4; x negative (or -0) mirrors about pi/2.
  r = b.select(b.compare(Compare::GT, ay, ax), b.binary("subtract", splat(b, kPi / 2, x), r), r);
  r = b.select(sign_bit_set(b, x), b.binary("subtract", splat(b, kPi, x), r), r);
  return b.select(sign_bit_set(b, y), b.unary("negate", r), r);
}

}  // namespace

Value arctangent2(Builder& b, const Value& y, const Value& x) {
  if (!b.for_xla_cpu() || x.element() != ElementType::F32 || y.element() != ElementType::F32 ||
      x.type.num_elements() < kVectorTrigMinElements) {
    return b.binary("atan2", y, x);
  }
  return polynomial_atan2(b, y, x);
}

Value sine(Builder& b, const Value& x) { return guarded(b, x, Function::Sine); }
Value cosine(Builder& b, const Value& x) { return guarded(b, x, Function::Cosine); }
Value tangent(Builder& b, const Value& x) { return guarded(b, x, Function::Tangent); }

Value cosine_in_range(Builder& b, const Value& x) {
  return b.for_xla_cpu() && x.element() == ElementType::F32 ? polynomial(b, x, Function::Cosine)
                                                            : b.unary("cosine", x);
}

}  // namespace tpu::hlo
