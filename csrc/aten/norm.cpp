// Normalization layers: layer, batch, group and RMS norm, and their backward.
#include "aten/ops.h"
#include "aten/program.h"

namespace tpu::aten {}  // namespace tpu::aten
