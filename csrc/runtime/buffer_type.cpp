#include "runtime/buffer_type.h"

#include <stdexcept>

namespace tpu::runtime {

PJRT_Buffer_Type buffer_type(hlo::ElementType type) {
  switch (type) {
    case hlo::ElementType::Pred: return PJRT_Buffer_Type_PRED;
    case hlo::ElementType::S8: return PJRT_Buffer_Type_S8;
    case hlo::ElementType::S16: return PJRT_Buffer_Type_S16;
    case hlo::ElementType::S32: return PJRT_Buffer_Type_S32;
    case hlo::ElementType::S64: return PJRT_Buffer_Type_S64;
    case hlo::ElementType::U8: return PJRT_Buffer_Type_U8;
    case hlo::ElementType::U16: return PJRT_Buffer_Type_U16;
    case hlo::ElementType::U32: return PJRT_Buffer_Type_U32;
    case hlo::ElementType::U64: return PJRT_Buffer_Type_U64;
    case hlo::ElementType::F16: return PJRT_Buffer_Type_F16;
    case hlo::ElementType::F32: return PJRT_Buffer_Type_F32;
    case hlo::ElementType::F64: return PJRT_Buffer_Type_F64;
    case hlo::ElementType::BF16: return PJRT_Buffer_Type_BF16;
    case hlo::ElementType::C64: return PJRT_Buffer_Type_C64;
    case hlo::ElementType::C128: return PJRT_Buffer_Type_C128;
    case hlo::ElementType::F8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
    case hlo::ElementType::F8E5M2: return PJRT_Buffer_Type_F8E5M2;
    case hlo::ElementType::F8E4M3FNUZ: return PJRT_Buffer_Type_F8E4M3FNUZ;
    case hlo::ElementType::F8E5M2FNUZ: return PJRT_Buffer_Type_F8E5M2FNUZ;
  }
  throw std::logic_error("unknown element type");
}

}  // namespace tpu::runtime
