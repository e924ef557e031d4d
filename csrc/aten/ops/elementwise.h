#pragma once
// add, sub, mul, div and relu: the hottest elementwise ops, with fast paths of their own.
// Implemented in elementwise.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                    at::Tensor& out);
at::Tensor add_scalar(const at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha);
at::Tensor& add_scalar_(at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha);
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                    at::Tensor& out);
at::Tensor sub_scalar(const at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha);
at::Tensor& sub_scalar_(at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha);
at::Tensor mul(const at::Tensor& self, const at::Tensor& other);
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other);
at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor mul_scalar(const at::Tensor& self, const c10::Scalar& other);
at::Tensor& mul_scalar_(at::Tensor& self, const c10::Scalar& other);
at::Tensor div(const at::Tensor& self, const at::Tensor& other);
at::Tensor& div_(at::Tensor& self, const at::Tensor& other);
at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor div_scalar(const at::Tensor& self, const c10::Scalar& other);
at::Tensor& div_scalar_(at::Tensor& self, const c10::Scalar& other);
at::Tensor relu(const at::Tensor& self);
at::Tensor& relu_(at::Tensor& self);
at::Tensor threshold_backward(const at::Tensor& grad_output, const at::Tensor& self,
                              const c10::Scalar& threshold);

}  // namespace tpu::aten
