// log(1 + x) lowered for XLA:CPU's code generator.
//
// XLA:CPU computes stablehlo.log_plus_one by calling libm's scalar log1pf for every element,
// about 6x PyTorch's vectorized log1p on a million float32 values; softplus and the
// binary-cross-entropy losses call it on every element. When the builder targets XLA:CPU,
// float32 tensors of at least kVectorTrigMinElements elements get Goldberg's formula instead,
// log(u) * x / (u - 1) with u = 1 + x, which XLA vectorizes: the division cancels the rounding
// of u, keeping the result within a few ULP of log1p. Other targets and types always get
// stablehlo.log_plus_one.
#pragma once

#include "builder.h"

namespace tpu::hlo {

Value log_plus_one(Builder& b, const Value& x);

}  // namespace tpu::hlo
