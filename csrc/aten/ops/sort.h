#pragma once
// Sorting and scans: sort, topk, cumsum, cumprod, isin.
// Implemented in sort.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

TensorPair sort(const at::Tensor& self, int64_t dim, bool descending);
TensorPair sort_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                       bool descending);
TensorRefPair sort_values(const at::Tensor& self, int64_t dim, bool descending, at::Tensor& values,
                          at::Tensor& indices);
TensorRefPair sort_values_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                 bool descending, at::Tensor& values, at::Tensor& indices);
TensorPair topk(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest, bool sorted);
TensorRefPair topk_values(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                          bool sorted, at::Tensor& values, at::Tensor& indices);
at::Tensor cumsum(const at::Tensor& self, int64_t dim, OptionalDtype dtype);
at::Tensor& cumsum_out(const at::Tensor& self, int64_t dim, OptionalDtype dtype, at::Tensor& out);
at::Tensor& cumsum_(at::Tensor& self, int64_t dim, OptionalDtype dtype);
at::Tensor cumprod(const at::Tensor& self, int64_t dim, OptionalDtype dtype);
at::Tensor& cumprod_out(const at::Tensor& self, int64_t dim, OptionalDtype dtype, at::Tensor& out);
at::Tensor& cumprod_(at::Tensor& self, int64_t dim, OptionalDtype dtype);
at::Tensor isin_tensor_tensor(const at::Tensor& elements, const at::Tensor& test_elements,
                              bool assume_unique, bool invert);
at::Tensor& isin_tensor_tensor_out(const at::Tensor& elements, const at::Tensor& test_elements,
                                   bool assume_unique, bool invert, at::Tensor& out);
at::Tensor isin_tensor_scalar(const at::Tensor& elements, const c10::Scalar& test_element,
                              bool assume_unique, bool invert);
at::Tensor& isin_tensor_scalar_out(const at::Tensor& elements, const c10::Scalar& test_element,
                                   bool assume_unique, bool invert, at::Tensor& out);
at::Tensor isin_scalar_tensor(const c10::Scalar& element, const at::Tensor& test_elements,
                              bool assume_unique, bool invert);
at::Tensor& isin_scalar_tensor_out(const c10::Scalar& element, const at::Tensor& test_elements,
                                   bool assume_unique, bool invert, at::Tensor& out);

}  // namespace tpu::aten
