#include "layer_norm.h"

#include <ATen/core/Tensor.h>
#if defined(__x86_64__)
// The kernels are called through PyTorch's dispatch stubs, which write into our buffers (the
// at::cpu functions allocate their results, and copying them out cost as much as the norm).
// A stub's call names the CPU capabilities libtorch was built with: its x86 builds have AVX2 and
// AVX512 kernels, and declaring them makes the call match the dispatcher libtorch exports.
// Elsewhere the kernels are not installed and XLA's own layer norm serves.
#define HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#define TORCH_TPU_HOST_LAYER_NORM 1
#include <ATen/native/layer_norm.h>
#endif

#include <atomic>
#include <exception>

#include "ffi_call.h"
#include "matmul.h"

namespace tpu::host_kernels {

#if TORCH_TPU_HOST_LAYER_NORM
namespace {

void check_rows(const at::Tensor& x) {
  if (x.dim() != 2) throw std::invalid_argument("the input must be [rows, columns]");
}

// (x, [weight, [bias,]] eps) -> (y, mean, rstd)
ffi::Error* forward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  const int64_t operands = frame->args.size;
  if (operands < 2 || operands > 4 || frame->rets.size != 3) {
    return fail(frame, "torch_tpu host layer norm: expected 2 to 4 operands and 3 results");
  }
  try {
    at::Tensor x = as_tensor(operand(frame, 0));
    check_rows(x);
    at::Tensor weight = operands >= 3 ? as_tensor(operand(frame, 1)) : at::Tensor();
    at::Tensor bias = operands == 4 ? as_tensor(operand(frame, 2)) : at::Tensor();
    const double eps = scalar_of(operand(frame, operands - 1));
    at::Tensor y = as_tensor(result(frame, 0));
    at::Tensor mean = as_tensor(result(frame, 1));
    at::Tensor rstd = as_tensor(result(frame, 2));
    run_kernel(x.numel() * 4, [&] {
      at::native::LayerNormKernel(c10::kCPU, x, weight, bias, x.size(0), x.size(1), eps, &y, &mean,
                                  &rstd);
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host layer norm: ") + e.what());
  }
}

// (grad_y, x, mean, rstd[, weight]) -> (grad_x[, grad_weight, grad_bias])
ffi::Error* backward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  const bool affine = frame->args.size == 5;
  if ((frame->args.size != 4 && !affine) || frame->rets.size != (affine ? 3u : 1u)) {
    return fail(frame,
                "torch_tpu host layer norm backward: expected 4 operands and 1 result, or 5 "
                "operands and 3 results");
  }
  try {
    at::Tensor grad_y = as_tensor(operand(frame, 0));
    at::Tensor x = as_tensor(operand(frame, 1));
    check_rows(x);
    at::Tensor mean = as_tensor(operand(frame, 2));
    at::Tensor rstd = as_tensor(operand(frame, 3));
    at::Tensor weight = affine ? as_tensor(operand(frame, 4)) : at::Tensor();
    at::Tensor grad_x = as_tensor(result(frame, 0));
    at::Tensor grad_weight = affine ? as_tensor(result(frame, 1)) : at::Tensor();
    at::Tensor grad_bias = affine ? as_tensor(result(frame, 2)) : at::Tensor();
    run_kernel(x.numel() * 8, [&] {
      at::native::LayerNormBackwardKernel(c10::kCPU, grad_y, x, mean, rstd, weight, x.size(0),
                                          x.size(1), &grad_x, &grad_weight, &grad_bias);
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host layer norm backward: ") + e.what());
  }
}

}  // namespace
#endif  // TORCH_TPU_HOST_LAYER_NORM

namespace {
KernelSet kernels{"layer norm"};
}  // namespace

std::string host_layer_norm_target(bool backward) {
  return backward ? "torch_tpu.host_layer_norm_backward" : "torch_tpu.host_layer_norm";
}

bool host_layer_norm_enabled() { return kernels.enabled(); }

bool install_host_layer_norm() {
#if !TORCH_TPU_HOST_LAYER_NORM
  return false;
#else
  return kernels.install(
      {{host_layer_norm_target(false), &forward}, {host_layer_norm_target(true), &backward}});
#endif
}

}  // namespace tpu::host_kernels
