#include "trig.h"

#include <vector>

namespace tpu::hlo {

namespace {

Value splat(Builder& b, double v, const Value& like) {
  return b.broadcast_to(b.constant(v, like.element()), like.dims());
}
Value add(Builder& b, const Value& x, const Value& y) { return b.binary("add", x, y); }
Value mul(Builder& b, const Value& x, const Value& y) { return b.binary("multiply", x, y); }

// Horner's scheme: ((c0 * x + c1) * x + c2) ...
Value horner(Builder& b, const Value& x, const std::vector<double>& coefficients) {
  Value y = splat(b, coefficients.front(), x);
  for (size_t i = 1; i < coefficients.size(); ++i) {
    y = add(b, mul(b, y, x), splat(b, coefficients[i], x));
  }
  return y;
}

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

}  // namespace

Value sine(Builder& b, const Value& x) { return guarded(b, x, Function::Sine); }
Value cosine(Builder& b, const Value& x) { return guarded(b, x, Function::Cosine); }
Value tangent(Builder& b, const Value& x) { return guarded(b, x, Function::Tangent); }

Value cosine_in_range(Builder& b, const Value& x) {
  return b.for_xla_cpu() && x.element() == ElementType::F32 ? polynomial(b, x, Function::Cosine)
                                                            : b.unary("cosine", x);
}

}  // namespace tpu::hlo
