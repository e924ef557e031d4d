#pragma once
// The _foreach_ ops.
// Implemented in foreach.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

// foreach.cpp: makes every _foreach_* op run its per-tensor reference loop on tpu.
// Called once from the Python module's initialisation (all ATen ops are known then).
void register_foreach_kernels();

}  // namespace tpu::aten
