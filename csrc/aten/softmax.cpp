// softmax and log_softmax, and their backward.
#include "aten/ops.h"
#include "aten/program.h"

namespace tpu::aten {}  // namespace tpu::aten
