#pragma once
// Factories: empty tensors (the allocator's entry points), fill, zero.
// Implemented in factories.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format);
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory);
// A kernel's new contiguous result: empty_memory_format called directly, not through the
// dispatcher (whose boxing and lookup cost a small op about as much as the rest of it).
inline at::Tensor new_empty(c10::IntArrayRef size, const c10::TensorOptions& options) {
  return empty_memory_format(size, options.dtype().toScalarType(), std::nullopt, options.device(),
                             std::nullopt, std::nullopt);
}
// A one-input elementwise result laid out as TensorIterator lays it out (and empty_like
// with preserve_format): contiguous for a contiguous input, the input's strides for a dense
// one, and otherwise the input's order of dimensions, densely (a channels_last slice gives
// a channels_last result).
at::Tensor new_empty_like(const at::Tensor& like, c10::ScalarType type);
at::Tensor& fill_scalar_(at::Tensor& self, const c10::Scalar& value);
at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);

}  // namespace tpu::aten
