// Sparse COO tensors on tpu: a sparse tpu tensor is PyTorch's own SparseTensorImpl holding
// two dense tpu tensors (indices and values), as on CUDA. What a sparse tensor is made of
// (its constructors, accessors, resizing and copy) are ATen's device-generic kernels,
// registered here for SparsePrivateUse1 as ATen registers them for SparseCPU and
// SparseCUDA. Sparse arithmetic (add of a sparse gradient, coalesce, to_dense, ...) runs on
// the CPU through the fallback, counted and warned about as any other fallback: it is what
// nn.Embedding(sparse=True), EmbeddingBag and SparseAdam need, not a fast path.
#include <ATen/ATen.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <torch/library.h>

#include "aten/fallback.h"

namespace tpu::aten {

namespace {

// The fallback copies a mutated sparse argument back with _copy_from_and_resize(cpu, tpu):
// copy_ resizes a sparse destination to its source (indices and values alike).
at::Tensor copy_from_and_resize_sparse(const at::Tensor& self, const at::Tensor& dst) {
  TORCH_CHECK(dst.is_sparse() && self.is_sparse(),
              "_copy_from_and_resize: a sparse tpu tensor takes only a sparse source, got ",
              self.layout());
  return at::native::copy_sparse_wrapper_(const_cast<at::Tensor&>(dst), self, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_symint));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize_sparse));
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_sparse_cpu_fallback>());
}

}  // namespace tpu::aten
