#include "batch_norm.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/native_batch_norm_backward_cpu_dispatch.h>
#include <ATen/ops/native_batch_norm_cpu_dispatch.h>

#include <atomic>
#include <exception>
#include <optional>
#include <stdexcept>

#include "ffi_call.h"
#include "matmul.h"

namespace tpu::host_kernels {

namespace {

// The operands between x and the flags, in order, each present or not.
struct Optionals {
  int64_t next = 1;
  std::optional<at::Tensor> take(const ffi::CallFrame* frame, bool present) {
    if (!present) return std::nullopt;
    return as_tensor(operand(frame, next++));
  }
};

ffi::Error* forward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  try {
    const int64_t operands = frame->args.size;
    if (operands < 4) throw std::invalid_argument("expected at least 4 operands");
    c10::ArrayRef<int64_t> flags = int64s_of(operand(frame, operands - 3), 3);
    const bool has_weight = flags[0] != 0, has_bias = flags[1] != 0, has_running = flags[2] != 0;
    if (operands != 4 + has_weight + has_bias + 2 * has_running ||
        frame->rets.size != 3 + 2 * has_running) {
      throw std::invalid_argument("operand or result count differs from the flags");
    }
    const double momentum = scalar_of(operand(frame, operands - 2));
    const double eps = scalar_of(operand(frame, operands - 1));
    at::Tensor x = as_tensor(operand(frame, 0));
    Optionals optionals;
    std::optional<at::Tensor> weight = optionals.take(frame, has_weight);
    std::optional<at::Tensor> bias = optionals.take(frame, has_bias);
    std::optional<at::Tensor> running_mean, running_var;
    at::Tensor y = as_tensor(result(frame, 0));
    at::Tensor save_mean = as_tensor(result(frame, 1));
    at::Tensor save_invstd = as_tensor(result(frame, 2));
    run_kernel(x.numel() * 4, [&] {
      if (has_running) {
        // The kernel updates the running statistics in place: in the results' buffers.
        running_mean = as_tensor(result(frame, 3)).copy_(*optionals.take(frame, true));
        running_var = as_tensor(result(frame, 4)).copy_(*optionals.take(frame, true));
      }
      at::cpu::native_batch_norm_out(y, save_mean, save_invstd, x, weight, bias, running_mean,
                                     running_var, /*training=*/true, momentum, eps);
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host batch norm: ") + e.what());
  }
}

ffi::Error* backward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  try {
    const int64_t operands = frame->args.size;
    if (operands < 6) throw std::invalid_argument("expected at least 6 operands");
    c10::ArrayRef<int64_t> flags = int64s_of(operand(frame, operands - 2), 4);
    const bool has_weight = flags[0] != 0;
    const std::array<bool, 3> mask{flags[1] != 0, flags[2] != 0, flags[3] != 0};
    if (operands != 6 + has_weight || frame->rets.size != mask[0] + mask[1] + mask[2]) {
      throw std::invalid_argument("operand or result count differs from the flags");
    }
    const double eps = scalar_of(operand(frame, operands - 1));
    at::Tensor grad_y = as_tensor(operand(frame, 0));
    at::Tensor x = as_tensor(operand(frame, 1));
    std::optional<at::Tensor> weight;
    if (has_weight) weight = as_tensor(operand(frame, 2));
    at::Tensor save_mean = as_tensor(operand(frame, 2 + has_weight));
    at::Tensor save_invstd = as_tensor(operand(frame, 3 + has_weight));
    run_kernel(x.numel() * 8, [&] {
      auto grads = at::cpu::native_batch_norm_backward(grad_y, x, weight, std::nullopt,
                                                       std::nullopt, save_mean, save_invstd,
                                                       /*train=*/true, eps, mask);
      int64_t next = 0;
      if (mask[0]) as_tensor(result(frame, next++)).copy_(std::get<0>(grads));
      if (mask[1]) as_tensor(result(frame, next++)).copy_(std::get<1>(grads));
      if (mask[2]) as_tensor(result(frame, next++)).copy_(std::get<2>(grads));
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host batch norm backward: ") + e.what());
  }
}

KernelSet kernels{"batch norm"};

}  // namespace

std::string host_batch_norm_target(bool backward) {
  return backward ? "torch_tpu.host_batch_norm_backward" : "torch_tpu.host_batch_norm";
}

bool host_batch_norm_enabled() { return kernels.enabled(); }

bool install_host_batch_norm() {
  return kernels.install(
      {{host_batch_norm_target(false), &forward}, {host_batch_norm_target(true), &backward}});
}

}  // namespace tpu::host_kernels
