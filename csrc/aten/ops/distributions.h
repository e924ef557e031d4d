#pragma once
// Continuous and geometric draws from the device generator: exponential_, log_normal_,
// cauchy_, geometric_. Implemented in distributions.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> generator);
at::Tensor& log_normal_(at::Tensor& self, double mean, double std,
                        std::optional<at::Generator> generator);
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma,
                    std::optional<at::Generator> generator);
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> generator);

}  // namespace tpu::aten
