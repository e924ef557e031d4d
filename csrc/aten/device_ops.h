#pragma once
// The device glue's own kernels: stream records, copies between devices, views and
// storage resizing (guard.cpp, copy.cpp, views.cpp).
#include "aten/ops/common.h"

namespace tpu::aten {

void record_stream(at::Tensor& self, c10::Stream stream);

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking);
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);
c10::Scalar local_scalar_dense(const at::Tensor& self);

at::Tensor view(const at::Tensor& self, c10::IntArrayRef size);
at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                      std::optional<int64_t> storage_offset);
at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride);
at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step);
at::Tensor view_as_real(const at::Tensor& self);
at::Tensor view_as_complex(const at::Tensor& self);
const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format);
at::Tensor& set_storage_(at::Tensor& self, c10::Storage source, int64_t storage_offset,
                         c10::IntArrayRef size, c10::IntArrayRef stride);
at::Tensor& set_source_storage_(at::Tensor& self, c10::Storage source);
at::Tensor& set_tensor_(at::Tensor& self, const at::Tensor& source);
at::Tensor& set_empty_(at::Tensor& self);

}  // namespace tpu::aten
