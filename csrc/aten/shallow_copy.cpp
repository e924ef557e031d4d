// Lets `module.to("tpu")` keep each Parameter object, as it does for CUDA: nn.Module._apply
// and `param.data = ...` only move a tensor in place when PyTorch deems the two tensor types
// compatible, and its built-in list of dense backends leaves out PrivateUse1. Without this,
// moving a module makes new Parameters, which unties tied weights (GPT-2's, BERT's and T5's
// embeddings and output layers) and leaves optimizers built before the move holding the CPU
// tensors.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace tpu::aten {

namespace {

// A plain strided tensor on the CPU or on tpu: both use c10::TensorImpl with a storage, so
// one can take the other's metadata and storage (what set_data does).
bool is_dense_cpu_or_tpu(const at::Tensor& tensor) {
  constexpr auto backends =
      c10::DispatchKeySet({c10::BackendComponent::CPUBit, c10::BackendComponent::PrivateUse1Bit});
  c10::DispatchKeySet keys = tensor.key_set();
  return keys.has(c10::DispatchKey::Dense) && keys.has_any(backends) &&
         tensor.layout() == c10::kStrided;
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set())) return true;
  return is_dense_cpu_or_tpu(self) && is_dense_cpu_or_tpu(from);
}

}  // namespace

// The op is CompositeImplicitAutograd, so the autograd key needs the kernel too: otherwise
// the composite one answers before dispatch reaches PrivateUse1.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace tpu::aten
