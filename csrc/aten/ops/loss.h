#pragma once
// Losses.
// Implemented in loss.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction);
at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out);
at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction);

}  // namespace tpu::aten
