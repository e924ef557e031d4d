// Sine, cosine and tangent lowered for XLA:CPU's code generator.
//
// XLA:CPU computes stablehlo.sine and stablehlo.cosine by calling libm's scalar sinf/cosf for
// every element: about 3.9 ms per million float32 values on a 2-core x86 machine, six times
// PyTorch's vectorized sin (the polynomial below takes 0.75 ms). When the builder targets XLA:CPU
// (Builder::set_for_xla_cpu), float32 tensors of at least kVectorTrigMinElements elements get the
// same functions computed with Cody-Waite range reduction and minimax polynomials (the scheme of
// Eigen's psincos_float without FMA: at most 2 ULP from the exact value below kSineExactBelow /
// kCosineExactBelow), which XLA vectorizes. A tensor holding a larger or infinite |x| takes
// stablehlo.sine/cosine for all its elements, chosen at run time by a stablehlo.if, so every input
// keeps libm's accuracy. Other targets and types always get stablehlo.sine/cosine.
#pragma once

#include <cstdint>

#include "builder.h"

namespace tpu::hlo {

inline constexpr int64_t kVectorTrigMinElements = 1024;
inline constexpr double kSineExactBelow = 25966.0;
inline constexpr double kCosineExactBelow = 18838.0;

Value sine(Builder& b, const Value& x);
Value cosine(Builder& b, const Value& x);
// sin r / cos r (or -cos r / sin r) from the same reduction; libm's tanf is 7x slower still.
// The bound is kCosineExactBelow.
Value tangent(Builder& b, const Value& x);
// atan2(y, x) (same shapes). XLA:CPU calls libm's scalar atan2f per element, 30-40x PyTorch's
// time for atan, asin and acos (all three are atan2 here); for float32 tensors of at least
// kVectorTrigMinElements elements on XLA:CPU this is an octant reduction and Cephes' minimax
// polynomial for atan on [0, tan(pi/8)], within 2 ULP, with IEEE's zeros, infinities and NaN.
// No range guard: the reduction is exact-ish for every input.
Value arctangent2(Builder& b, const Value& y, const Value& x);
// cos(x) for x known to lie within +-kCosineExactBelow (an angle drawn in [0, 2 pi), say):
// the polynomial for float32 on XLA:CPU whatever the size, with no run-time range check.
Value cosine_in_range(Builder& b, const Value& x);

}  // namespace tpu::hlo
