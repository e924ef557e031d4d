#pragma once
// Upsampling.
// Implemented in resample.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::IntArrayRef output_size);
at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self);
at::Tensor upsample_nearest2d(const at::Tensor& self, c10::IntArrayRef output_size,
                              std::optional<double> scales_h, std::optional<double> scales_w);
at::Tensor upsample_nearest2d_backward(const at::Tensor& grad_output, c10::IntArrayRef output_size,
                                       c10::IntArrayRef input_size, std::optional<double> scales_h,
                                       std::optional<double> scales_w);
at::Tensor upsample_bilinear2d(const at::Tensor& self, c10::IntArrayRef output_size,
                               bool align_corners, std::optional<double> scales_h,
                               std::optional<double> scales_w);
at::Tensor upsample_bilinear2d_backward(const at::Tensor& grad_output, c10::IntArrayRef output_size,
                                        c10::IntArrayRef input_size, bool align_corners,
                                        std::optional<double> scales_h,
                                        std::optional<double> scales_w);

}  // namespace tpu::aten
