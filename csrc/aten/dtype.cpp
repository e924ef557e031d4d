#include "aten/dtype.h"

#include <c10/util/Exception.h>

#include "runtime/buffer_type.h"

namespace tpu::aten {

using hlo::ElementType;

hlo::ElementType element_type(c10::ScalarType type) {
  switch (type) {
    case c10::kBool: return ElementType::Pred;
    case c10::kChar: return ElementType::S8;
    case c10::kShort: return ElementType::S16;
    case c10::kInt: return ElementType::S32;
    case c10::kLong: return ElementType::S64;
    case c10::kByte: return ElementType::U8;
    case c10::kUInt16: return ElementType::U16;
    case c10::kUInt32: return ElementType::U32;
    case c10::kUInt64: return ElementType::U64;
    case c10::kHalf: return ElementType::F16;
    case c10::kFloat: return ElementType::F32;
    case c10::kDouble: return ElementType::F64;
    case c10::kBFloat16: return ElementType::BF16;
    case c10::kComplexFloat: return ElementType::C64;
    case c10::kComplexDouble: return ElementType::C128;
    case c10::kFloat8_e4m3fn:
    case c10::kFloat8_e5m2:
    case c10::kFloat8_e4m3fnuz:
    case c10::kFloat8_e5m2fnuz: return ElementType::F32;
    case c10::kComplexHalf: return ElementType::C64;
    default: TORCH_CHECK_TYPE(false, "the tpu device does not support dtype ", type);
  }
}

hlo::ElementType float8_type(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat8_e4m3fn: return ElementType::F8E4M3FN;
    case c10::kFloat8_e5m2: return ElementType::F8E5M2;
    case c10::kFloat8_e4m3fnuz: return ElementType::F8E4M3FNUZ;
    case c10::kFloat8_e5m2fnuz: return ElementType::F8E5M2FNUZ;
    default: TORCH_INTERNAL_ASSERT(false, "not an 8-bit float dtype: ", type);
  }
}

hlo::ElementType storage_element_type(c10::ScalarType type) {
  if (type == c10::kFloat8_e4m3fn || type == c10::kFloat8_e5m2 ||
      type == c10::kFloat8_e4m3fnuz || type == c10::kFloat8_e5m2fnuz) {
    return ElementType::U8;
  }
  if (type == c10::kComplexHalf) return ElementType::F16;
  return element_type(type);
}

int64_t storage_elements_per_value(c10::ScalarType type) {
  return type == c10::kComplexHalf ? 2 : 1;
}

c10::ScalarType scalar_type(hlo::ElementType type) {
  switch (type) {
    case ElementType::Pred: return c10::kBool;
    case ElementType::S8: return c10::kChar;
    case ElementType::S16: return c10::kShort;
    case ElementType::S32: return c10::kInt;
    case ElementType::S64: return c10::kLong;
    case ElementType::U8: return c10::kByte;
    case ElementType::U16: return c10::kUInt16;
    case ElementType::U32: return c10::kUInt32;
    case ElementType::U64: return c10::kUInt64;
    case ElementType::F16: return c10::kHalf;
    case ElementType::F32: return c10::kFloat;
    case ElementType::F64: return c10::kDouble;
    case ElementType::BF16: return c10::kBFloat16;
    case ElementType::C64: return c10::kComplexFloat;
    case ElementType::C128: return c10::kComplexDouble;
    case ElementType::F8E4M3FN: return c10::kFloat8_e4m3fn;
    case ElementType::F8E5M2: return c10::kFloat8_e5m2;
    case ElementType::F8E4M3FNUZ: return c10::kFloat8_e4m3fnuz;
    case ElementType::F8E5M2FNUZ: return c10::kFloat8_e5m2fnuz;
  }
  TORCH_INTERNAL_ASSERT(false, "unknown element type");
}

PJRT_Buffer_Type buffer_type(hlo::ElementType type) { return runtime::buffer_type(type); }

}  // namespace tpu::aten
