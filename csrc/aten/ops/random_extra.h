#pragma once
// More random ops.
// Implemented in random_extra.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor randperm(int64_t n, std::optional<c10::ScalarType> dtype,
                    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                    std::optional<bool> pin_memory);
at::Tensor randperm_generator(int64_t n, std::optional<at::Generator> generator,
                              std::optional<c10::ScalarType> dtype,
                              std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                              std::optional<bool> pin_memory);
at::Tensor& randperm_out(int64_t n, at::Tensor& out);
at::Tensor& randperm_generator_out(int64_t n, std::optional<at::Generator> generator,
                                   at::Tensor& out);
at::Tensor multinomial(const at::Tensor& self, int64_t num_samples, bool replacement,
                       std::optional<at::Generator> generator);
at::Tensor& multinomial_out(const at::Tensor& self, int64_t num_samples, bool replacement,
                            std::optional<at::Generator> generator, at::Tensor& out);

}  // namespace tpu::aten
