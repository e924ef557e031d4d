// Pointwise ops with several operands: where, masked_fill, clamp, lerp, addcmul, addcdiv, and the
// NaN/Inf tests.
#include "aten/ops.h"
#include "aten/program.h"

namespace tpu::aten {}  // namespace tpu::aten
