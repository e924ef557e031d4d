#include "element_type.h"

#include <stdexcept>
#include <string>

namespace tpu::pjrt {

namespace {
// Byte size of `type`, or 0 when torch_tpu does not move that type.
size_t lookup(PJRT_Buffer_Type type) {
  switch (type) {
    case PJRT_Buffer_Type_PRED: return 1;
    case PJRT_Buffer_Type_S8: return 1;
    case PJRT_Buffer_Type_S16: return 2;
    case PJRT_Buffer_Type_S32: return 4;
    case PJRT_Buffer_Type_S64: return 8;
    case PJRT_Buffer_Type_U8: return 1;
    case PJRT_Buffer_Type_U16: return 2;
    case PJRT_Buffer_Type_U32: return 4;
    case PJRT_Buffer_Type_U64: return 8;
    case PJRT_Buffer_Type_F16: return 2;
    case PJRT_Buffer_Type_F32: return 4;
    case PJRT_Buffer_Type_F64: return 8;
    case PJRT_Buffer_Type_BF16: return 2;
    case PJRT_Buffer_Type_C64: return 8;
    case PJRT_Buffer_Type_C128: return 16;
    case PJRT_Buffer_Type_F8E4M3FN: return 1;
    case PJRT_Buffer_Type_F8E5M2: return 1;
    case PJRT_Buffer_Type_F8E4M3FNUZ: return 1;
    case PJRT_Buffer_Type_F8E5M2FNUZ: return 1;
    default: return 0;
  }
}
}  // namespace

bool is_supported(PJRT_Buffer_Type type) { return lookup(type) != 0; }

size_t element_size(PJRT_Buffer_Type type) {
  size_t size = lookup(type);
  if (size == 0) {
    throw std::invalid_argument("unsupported PJRT element type " + std::to_string(type));
  }
  return size;
}

}  // namespace tpu::pjrt
