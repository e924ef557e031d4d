#pragma once
// Softmax and log-softmax.
// Implemented in softmax.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float);
at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out);
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float);
at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float,
                            at::Tensor& out);
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype);
at::Tensor& softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 c10::ScalarType input_dtype, at::Tensor& grad_input);
at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                c10::ScalarType input_dtype);
at::Tensor& log_softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                     c10::ScalarType input_dtype, at::Tensor& grad_input);

}  // namespace tpu::aten
