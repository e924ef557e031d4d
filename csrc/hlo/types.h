#pragma once
// Element and tensor types of StableHLO values.
#include <cstdint>
#include <string>
#include <vector>

namespace tpu::hlo {

enum class ElementType {
  Pred,
  S8,
  S16,
  S32,
  S64,
  U8,
  U16,
  U32,
  U64,
  F16,
  F32,
  F64,
  BF16,
  C64,
  C128,
  // 8-bit floats (one byte each): E4M3 without infinities, E5M2 as IEEE, and their "fnuz"
  // variants (no negative zero, NaN at 0x80).
  F8E4M3FN,
  F8E5M2,
  F8E4M3FNUZ,
  F8E5M2FNUZ
};

// "f32", "i1", "complex<f32>", ... as StableHLO spells it.
const char* mlir_name(ElementType type);
size_t byte_size(ElementType type);
bool is_float(ElementType type);    // f16, bf16, f32, f64 and the 8-bit floats
bool is_float8(ElementType type);
bool is_complex(ElementType type);  // c64, c128
bool is_signed_int(ElementType type);
bool is_unsigned_int(ElementType type);  // including Pred

struct TensorType {
  ElementType element = ElementType::F32;
  std::vector<int64_t> dims;

  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  int64_t num_elements() const;
  // "tensor<2x3xf32>"
  std::string str() const;
  // Appends str() to `out`.
  void append_to(std::string& out) const;
  bool operator==(const TensorType& other) const {
    return element == other.element && dims == other.dims;
  }
  bool operator!=(const TensorType& other) const { return !(*this == other); }
};

}  // namespace tpu::hlo
