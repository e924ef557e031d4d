#pragma once
// Shape ops: cat, flip, roll, tril/triu, padding.
// Implemented in shape.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out);
at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim);
at::Tensor flip(const at::Tensor& self, c10::IntArrayRef dims);
at::Tensor roll(const at::Tensor& self, c10::IntArrayRef shifts, c10::IntArrayRef dims);
at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out);
at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out);
at::Tensor tril(const at::Tensor& self, int64_t diagonal);
at::Tensor triu(const at::Tensor& self, int64_t diagonal);
at::Tensor& tril_(at::Tensor& self, int64_t diagonal);
at::Tensor& triu_(at::Tensor& self, int64_t diagonal);
at::Tensor constant_pad_nd(const at::Tensor& self, c10::IntArrayRef pad, const c10::Scalar& value);
#define TPU_DECLARE_PAD(name)                                                            \
  at::Tensor& name##_out(const at::Tensor& self, c10::IntArrayRef pad, at::Tensor& out); \
  at::Tensor name(const at::Tensor& self, c10::IntArrayRef pad);                         \
  at::Tensor& name##_backward_out(const at::Tensor& grad, const at::Tensor& self,        \
                                  c10::IntArrayRef pad, at::Tensor& grad_input);         \
  at::Tensor name##_backward(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef pad);
TPU_DECLARE_PAD(reflection_pad1d)
TPU_DECLARE_PAD(reflection_pad2d)
TPU_DECLARE_PAD(replication_pad1d)
TPU_DECLARE_PAD(replication_pad2d)
#undef TPU_DECLARE_PAD

}  // namespace tpu::aten
