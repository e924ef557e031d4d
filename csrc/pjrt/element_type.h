#pragma once
// The element types torch_tpu moves through PJRT, and their sizes.
#include <cstddef>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

// Byte size of one element; throws std::invalid_argument for types we do not support
// (so an invalid type never reaches the plugin, which would abort on it).
size_t element_size(PJRT_Buffer_Type type);
bool is_supported(PJRT_Buffer_Type type);

}  // namespace tpu::pjrt
