#pragma once
// torch dtypes <-> StableHLO element types <-> PJRT buffer types.
#include <c10/core/ScalarType.h>

#include "hlo/types.h"
#include "pjrt_c_api.h"

namespace tpu::aten {

// The element type programs compute `type` in. Throws c10::TypeError naming the dtype
// when the tpu device cannot hold it. Two dtypes are computed in a wider type and only
// stored in their own (see Program::read and write): the 8-bit floats in f32, as PyTorch
// computes them, because XLA runs their arithmetic through f16 conversions that round
// the fnuz types' subnormals wrongly on XLA:CPU, and complex32 (no PJRT type) in c64.
hlo::ElementType element_type(c10::ScalarType type);
// The element type of a storage holding `type`: the 8-bit floats as their bytes (u8, so
// no op ever moves them through a float conversion), complex32 as f16 (real, imaginary)
// pairs, anything else its element_type.
hlo::ElementType storage_element_type(c10::ScalarType type);
// How many storage elements one value of `type` takes: 2 for complex32, else 1.
int64_t storage_elements_per_value(c10::ScalarType type);
// The 8-bit float type of `type`, a Float8 dtype.
hlo::ElementType float8_type(c10::ScalarType type);
c10::ScalarType scalar_type(hlo::ElementType type);
PJRT_Buffer_Type buffer_type(hlo::ElementType type);

}  // namespace tpu::aten
