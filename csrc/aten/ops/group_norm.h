#pragma once
// Group norm.
// Implemented in group_norm.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, int64_t N, int64_t C, int64_t HxW, int64_t group,
    double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, int64_t N, int64_t C,
    int64_t HxW, int64_t group, std::array<bool, 3> mask);

}  // namespace tpu::aten
