#pragma once
// Random draws from the device generator: uniform, normal, random, bernoulli, dropout.
// Implemented in random.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor& uniform_(at::Tensor& self, double from, double to,
                     std::optional<at::Generator> generator);
at::Tensor& normal_(at::Tensor& self, double mean, double std,
                    std::optional<at::Generator> generator);
at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> generator);
at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> generator);
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> generator);
at::Tensor& bernoulli_float_(at::Tensor& self, double probability,
                             std::optional<at::Generator> generator);
at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& probability,
                              std::optional<at::Generator> generator);
at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> generator);
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train);
at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask,
                                   double scale);

}  // namespace tpu::aten
