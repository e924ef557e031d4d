#pragma once
// torch dtypes <-> StableHLO element types <-> PJRT buffer types.
#include <c10/core/ScalarType.h>

#include "hlo/types.h"
#include "pjrt_c_api.h"

namespace tpu::aten {

// Throws c10::TypeError naming the dtype when the tpu device cannot hold it.
hlo::ElementType element_type(c10::ScalarType type);
c10::ScalarType scalar_type(hlo::ElementType type);
PJRT_Buffer_Type buffer_type(hlo::ElementType type);

}  // namespace tpu::aten
