#pragma once
// Shorthands for elementwise formulas written as StableHLO: the special functions, activations
// and polynomial approximations that lowerings build term by term.
#include <initializer_list>

#include "builder.h"

namespace tpu::hlo {

// `v` broadcast to `like`'s shape and element type.
Value splat(Builder& b, double v, const Value& like);
Value add(Builder& b, const Value& x, const Value& y);
Value sub(Builder& b, const Value& x, const Value& y);
Value mul(Builder& b, const Value& x, const Value& y);
Value div(Builder& b, const Value& x, const Value& y);

// A polynomial by Horner's scheme, highest power first: ((c0 * x + c1) * x + c2) ...
Value horner(Builder& b, const Value& x, std::initializer_list<double> coefficients);

// Whether a float's sign bit is set: true for -0.0 and negative NaNs, unlike x < 0.
Value sign_bit_set(Builder& b, const Value& x);

}  // namespace tpu::hlo
