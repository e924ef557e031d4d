#pragma once
// Advanced indexing: index, index_put, masked_select, nonzero.
// Implemented in index_advanced.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                      at::Tensor& out);
at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices);
at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool unsafe);
at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask);
at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out);
at::Tensor nonzero(const at::Tensor& self);
at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out);

}  // namespace tpu::aten
