#pragma once
// StableHLO element types -> PJRT buffer types.
#include "hlo/types.h"
#include "pjrt_c_api.h"

namespace tpu::runtime {

PJRT_Buffer_Type buffer_type(hlo::ElementType type);

}  // namespace tpu::runtime
