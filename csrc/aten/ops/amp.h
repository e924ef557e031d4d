#pragma once
// Mixed precision: gradient unscaling and the loss scale's update.
// Implemented in amp.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

void amp_foreach_non_finite_check_and_unscale_(at::TensorList grads, at::Tensor& found_inf,
                                               const at::Tensor& inv_scale);
at::Tensor& amp_update_scale_(at::Tensor& scale, at::Tensor& growth_tracker,
                              const at::Tensor& found_inf, double growth_factor,
                              double backoff_factor, int64_t growth_interval);

}  // namespace tpu::aten
