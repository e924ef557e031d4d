// View kernels (metadata only: they share the base storage) and the storage-
// changing ops resize_ and set_.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/strides.h>

#include "aten/ops/all.h"
#include "aten/storage.h"

namespace tpu::aten {

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  return at::native::view(self, size);
}

at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  return at::native::_reshape_alias(self, size, stride);
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

at::Tensor view_as_real(const at::Tensor& self) { return at::native::view_as_real(self); }

at::Tensor view_as_complex(const at::Tensor& self) { return at::native::view_as_complex(self); }

namespace {
// Grows the storage of `self` (never shrinks it) so its current view fits.
void fit_storage(const at::Tensor& self) {
  if (self.numel() == 0) return;
  size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                   self.element_size(), self.storage_offset());
  if (needed > self.storage().nbytes()) resize_storage_bytes(self.storage(), needed);
}
}  // namespace

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != c10::MemoryFormat::Preserve, "Unsupported memory format",
                *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  fit_storage(self);
  return self;
}

at::Tensor& set_storage_(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                         c10::IntArrayRef size, c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, source, storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  c10::DimVector strides =
      stride.empty() ? c10::contiguous_strides(size) : c10::DimVector(stride.begin(), stride.end());
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, strides);
  fit_storage(self);
  return self;
}

at::Tensor& set_source_storage_(at::Tensor& self, c10::Storage source) {
  int64_t elements = static_cast<int64_t>(source.nbytes() / self.element_size());
  return set_storage_(self, source, 0, {elements}, {});
}

at::Tensor& set_tensor_(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage_(self, source.storage(), source.storage_offset(), source.sizes(),
                      source.strides());
}

at::Tensor& set_empty_(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, allocator(), /*resizable=*/true);
  return set_storage_(self, empty, 0, {0}, {});
}

}  // namespace tpu::aten
