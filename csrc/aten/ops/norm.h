#pragma once
// Layer norm and its relatives.
// Implemented in norm.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps);
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> mask);
std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input,
                                                  c10::IntArrayRef normalized_shape,
                                                  const std::optional<at::Tensor>& weight,
                                                  std::optional<double> eps);
std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, std::array<bool, 2> mask);
std::tuple<at::Tensor, at::Tensor> weight_norm_interface(const at::Tensor& v, const at::Tensor& g,
                                                         int64_t dim);
std::tuple<at::Tensor, at::Tensor> weight_norm_interface_backward(const at::Tensor& grad_w,
                                                                  const at::Tensor& saved_v,
                                                                  const at::Tensor& saved_g,
                                                                  const at::Tensor& saved_norms,
                                                                  int64_t dim);

}  // namespace tpu::aten
