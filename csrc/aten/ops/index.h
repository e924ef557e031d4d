#pragma once
// Indexing along one dimension: index_select, gather, scatter, index_add, embedding's backward.
// Implemented in index.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             at::Tensor& out);
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index);
at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool sparse_grad, at::Tensor& out);
at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad);
at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out);
at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const c10::Scalar& value, at::Tensor& out);
at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                               const at::Tensor& src, c10::string_view reduce, at::Tensor& out);
at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const c10::Scalar& value, c10::string_view reduce,
                                     at::Tensor& out);
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out);
at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                   const at::Tensor& src, c10::string_view reduce,
                                   bool include_self, at::Tensor& out);
at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const at::Tensor& source, at::Tensor& out);
at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& source, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                    int64_t num_weights, int64_t padding_idx,
                                    bool scale_grad_by_freq);

}  // namespace tpu::aten
