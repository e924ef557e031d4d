#pragma once
// Pooling.
// Implemented in pool.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(
    const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode);
at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                                            c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                            bool ceil_mode, const at::Tensor& indices);
at::Tensor avg_pool2d(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override);
at::Tensor avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                               c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override);

}  // namespace tpu::aten
