// The _foreach_* ops (what torch.optim uses with foreach=True) run PyTorch's
// reference "slow" kernels, which loop over the tensor lists calling the per-tensor
// ATen ops; those ops then dispatch to the tpu kernels. Registered for every
// _foreach_ operator the dispatcher knows, so new ones need no code here.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>

#include "aten/ops.h"

namespace tpu::aten {

namespace {

void run_reference_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet /*keys*/,
                          torch::jit::Stack* stack) {
  // The CPU entries of the _foreach_ ops are the device-agnostic loops over
  // per-tensor ops (the CUDA ones are fused kernels).
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

}  // namespace

void register_foreach_kernels() {
  static std::unique_ptr<torch::Library> library;
  if (library != nullptr) return;
  library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                             c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind("aten::_foreach_", 0) != 0) continue;
    std::string qualified = name.name.substr(6);  // drop "aten::"
    if (!name.overload_name.empty()) qualified += "." + name.overload_name;
    library->impl(qualified.c_str(),
                  torch::CppFunction::makeFromBoxedFunction<&run_reference_kernel>());
  }
}

}  // namespace tpu::aten
