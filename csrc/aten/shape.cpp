// Shape ops that move data: cat, stack, flip, roll, repeat, tril/triu, padding.
#include "aten/ops.h"
#include "aten/program.h"

namespace tpu::aten {}  // namespace tpu::aten
