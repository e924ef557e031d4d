// torch.autocast("tpu"): the AutocastPrivateUse1 kernels. PyTorch ships the op lists
// (ATen/autocast_mode.h) but registers them only for its own devices, so a backend
// registers them itself. These are the lists CUDA uses: matmuls, linear, convolutions
// and attention run in the autocast dtype (bfloat16 by default on tpu, see
// torch_tpu/device.py); softmax, norms, losses, pointwise transcendentals and sums in
// float32; ops mixing dtypes promote to the widest.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "aten/torch_compat.h"

namespace tpu::aten {
namespace {

at::Tensor binary_cross_entropy_banned(const at::Tensor& /*self*/, const at::Tensor& /*target*/,
                                       const std::optional<at::Tensor>& /*weight*/,
                                       int64_t /*reduction*/) {
  TORCH_CHECK(
      false,
      "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
      "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
      "layer.\nIn this case, combine the two layers using "
      "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss. "
      " binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.");
}

// Ops not listed run in whatever dtype their inputs have.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

// The op-list macros name these types unqualified (torch 2.11's lists also DimnameList).
#if TPU_TORCH_HAS_DIMNAME
using at::DimnameList;
#endif
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // clang-format off
#define TPU_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOWER_PRECISION_FP)
#undef TPU_LOWER_PRECISION_FP

#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TPU_FP32)
#undef TPU_FP32

#define TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_SET_OPT_DTYPE)
#undef TPU_FP32_SET_OPT_DTYPE

  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

#define TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TPU_PROMOTE)
#undef TPU_PROMOTE
  // clang-format on

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN((&binary_cross_entropy_banned)));
}

}  // namespace
}  // namespace tpu::aten
