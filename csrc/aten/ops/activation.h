#pragma once
// Activations.
// Implemented in activation.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate);
at::Tensor& gelu_(at::Tensor& self, c10::string_view approximate);
at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out);
at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self,
                         c10::string_view approximate);
at::Tensor silu(const at::Tensor& self);
at::Tensor& silu_(at::Tensor& self);
at::Tensor& silu_out(const at::Tensor& self, at::Tensor& out);
at::Tensor silu_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor softplus(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold);
at::Tensor& softplus_out(const at::Tensor& self, const c10::Scalar& beta,
                         const c10::Scalar& threshold, at::Tensor& out);
at::Tensor softplus_backward(const at::Tensor& grad, const at::Tensor& self,
                             const c10::Scalar& beta, const c10::Scalar& threshold);
at::Tensor leaky_relu(const at::Tensor& self, const c10::Scalar& slope);
at::Tensor& leaky_relu_(at::Tensor& self, const c10::Scalar& slope);
at::Tensor& leaky_relu_out(const at::Tensor& self, const c10::Scalar& slope, at::Tensor& out);
at::Tensor leaky_relu_backward(const at::Tensor& grad, const at::Tensor& self,
                               const c10::Scalar& slope, bool self_is_result);
at::Tensor elu(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
               const c10::Scalar& input_scale);
at::Tensor& elu_(at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                 const c10::Scalar& input_scale);
at::Tensor& elu_out(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                    const c10::Scalar& input_scale, at::Tensor& out);
at::Tensor elu_backward(const at::Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                        const c10::Scalar& input_scale, bool is_result,
                        const at::Tensor& self_or_result);
at::Tensor hardtanh(const at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max);
at::Tensor& hardtanh_(at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max);
at::Tensor& hardtanh_out(const at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max,
                         at::Tensor& out);
at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& min,
                             const c10::Scalar& max);
at::Tensor hardswish(const at::Tensor& self);
at::Tensor& hardswish_(at::Tensor& self);
at::Tensor& hardswish_out(const at::Tensor& self, at::Tensor& out);
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor hardsigmoid(const at::Tensor& self);
at::Tensor& hardsigmoid_(at::Tensor& self);
at::Tensor& hardsigmoid_out(const at::Tensor& self, at::Tensor& out);
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor sigmoid_backward(const at::Tensor& grad, const at::Tensor& output);
at::Tensor tanh_backward(const at::Tensor& grad, const at::Tensor& output);

}  // namespace tpu::aten
