#include "types.h"

#include <charconv>

namespace tpu::hlo {

const char* mlir_name(ElementType type) {
  switch (type) {
    case ElementType::Pred: return "i1";
    case ElementType::S8: return "i8";
    case ElementType::S16: return "i16";
    case ElementType::S32: return "i32";
    case ElementType::S64: return "i64";
    case ElementType::U8: return "ui8";
    case ElementType::U16: return "ui16";
    case ElementType::U32: return "ui32";
    case ElementType::U64: return "ui64";
    case ElementType::F16: return "f16";
    case ElementType::F32: return "f32";
    case ElementType::F64: return "f64";
    case ElementType::BF16: return "bf16";
    case ElementType::C64: return "complex<f32>";
    case ElementType::C128: return "complex<f64>";
    case ElementType::F8E4M3FN: return "f8E4M3FN";
    case ElementType::F8E5M2: return "f8E5M2";
    case ElementType::F8E4M3FNUZ: return "f8E4M3FNUZ";
    case ElementType::F8E5M2FNUZ: return "f8E5M2FNUZ";
  }
  return "?";
}

size_t byte_size(ElementType type) {
  switch (type) {
    case ElementType::Pred:
    case ElementType::S8:
    case ElementType::U8:
    case ElementType::F8E4M3FN:
    case ElementType::F8E5M2:
    case ElementType::F8E4M3FNUZ:
    case ElementType::F8E5M2FNUZ: return 1;
    case ElementType::S16:
    case ElementType::U16:
    case ElementType::F16:
    case ElementType::BF16: return 2;
    case ElementType::S32:
    case ElementType::U32:
    case ElementType::F32: return 4;
    case ElementType::S64:
    case ElementType::U64:
    case ElementType::F64:
    case ElementType::C64: return 8;
    case ElementType::C128: return 16;
  }
  return 0;
}

bool is_float(ElementType type) {
  return type == ElementType::F16 || type == ElementType::BF16 || type == ElementType::F32 ||
         type == ElementType::F64 || is_float8(type);
}

bool is_float8(ElementType type) {
  return type == ElementType::F8E4M3FN || type == ElementType::F8E5M2 ||
         type == ElementType::F8E4M3FNUZ || type == ElementType::F8E5M2FNUZ;
}

bool is_complex(ElementType type) { return type == ElementType::C64 || type == ElementType::C128; }

bool is_signed_int(ElementType type) {
  return type == ElementType::S8 || type == ElementType::S16 || type == ElementType::S32 ||
         type == ElementType::S64;
}

bool is_unsigned_int(ElementType type) {
  return type == ElementType::Pred || type == ElementType::U8 || type == ElementType::U16 ||
         type == ElementType::U32 || type == ElementType::U64;
}

int64_t TensorType::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string out;
  append_to(out);
  return out;
}

void TensorType::append_to(std::string& out) const {
  // Built by appending: this runs several times for every op an eager mode records.
  out += "tensor<";
  char digits[24];
  for (int64_t d : dims) {
    char* end = std::to_chars(digits, digits + sizeof digits, d).ptr;
    out.append(digits, end);
    out += 'x';
  }
  out += mlir_name(element);
  out += '>';
}

}  // namespace tpu::hlo
