#pragma once
// polar, arange and eye.
// Implemented in polar.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out);
at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                       at::Tensor& out);
at::Tensor& eye_out(int64_t n, at::Tensor& out);
at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out);

}  // namespace tpu::aten
