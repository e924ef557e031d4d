#pragma once
// Ops with dtype rules of their own: signbit, frac, logit, heaviside.
// Implemented in special_functions.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor signbit(const at::Tensor& self);
at::Tensor& signbit_out(const at::Tensor& self, at::Tensor& out);
at::Tensor frac(const at::Tensor& self);
at::Tensor& frac_(at::Tensor& self);
at::Tensor& frac_out(const at::Tensor& self, at::Tensor& out);
at::Tensor logit(const at::Tensor& self, std::optional<double> eps);
at::Tensor& logit_(at::Tensor& self, std::optional<double> eps);
at::Tensor& logit_out(const at::Tensor& self, std::optional<double> eps, at::Tensor& out);
at::Tensor heaviside(const at::Tensor& self, const at::Tensor& values);
at::Tensor& heaviside_(at::Tensor& self, const at::Tensor& values);
at::Tensor& heaviside_out(const at::Tensor& self, const at::Tensor& values, at::Tensor& out);
at::Tensor isneginf(const at::Tensor& self);
at::Tensor& isneginf_out(const at::Tensor& self, at::Tensor& out);

}  // namespace tpu::aten
