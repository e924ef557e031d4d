// Indexing: index_select, gather, scatter, advanced indexing, index_put_, masked_select, nonzero,
// embedding.
#include "aten/ops.h"
#include "aten/program.h"

namespace tpu::aten {}  // namespace tpu::aten
