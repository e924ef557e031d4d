#include "attention.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward_cpu_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_cpu_dispatch.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <exception>
#include <optional>

#include "ffi_call.h"
#include "matmul.h"
#include "pjrt/ffi_extension.h"
#include "runtime/runtime.h"

namespace tpu::host_kernels {

namespace {

const ffi::Buffer& operand(const ffi::CallFrame* frame, int64_t i) {
  return *static_cast<const ffi::Buffer*>(frame->args.args[i]);
}
const ffi::Buffer& result(const ffi::CallFrame* frame, int64_t i) {
  return *static_cast<const ffi::Buffer*>(frame->rets.args[i]);
}

// A [n, rows, cols] buffer as the [batch 1, heads n, rows, cols] tensor the kernel takes.
at::Tensor heads(const ffi::Buffer& buffer) { return as_tensor(buffer).unsqueeze(0); }

double scale_of(const ffi::Buffer& buffer) {
  if (buffer.dtype != ffi::kF32 || buffer.rank != 0) {
    throw std::invalid_argument("the scale must be a float32 scalar");
  }
  return *static_cast<const float*>(buffer.data);
}

// Runs `body` with PyTorch's threads on the main thread, on this thread alone elsewhere.
template <typename Body>
void on_this_thread(const Body& body) {
  if (on_main_thread()) return body();
  OneThread one_thread;
  body();
}

template <bool kCausal>
ffi::Error* forward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  if (frame->args.size != 4 || frame->rets.size != 2) {
    return fail(frame, "torch_tpu host attention: expected 4 operands and 2 results");
  }
  try {
    on_this_thread([&] {
      auto [out, lse] = at::cpu::_scaled_dot_product_flash_attention_for_cpu(
          heads(operand(frame, 0)), heads(operand(frame, 1)), heads(operand(frame, 2)),
          /*dropout_p=*/0.0, kCausal, std::nullopt, scale_of(operand(frame, 3)));
      heads(result(frame, 0)).copy_(out);
      as_tensor(result(frame, 1)).unsqueeze(0).copy_(lse);
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host attention: ") + e.what());
  }
}

template <bool kCausal>
ffi::Error* backward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  if (frame->args.size != 7 || frame->rets.size != 3) {
    return fail(frame, "torch_tpu host attention backward: expected 7 operands and 3 results");
  }
  try {
    on_this_thread([&] {
      auto [grad_q, grad_k, grad_v] = at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
          heads(operand(frame, 0)), heads(operand(frame, 1)), heads(operand(frame, 2)),
          heads(operand(frame, 3)), heads(operand(frame, 4)),
          as_tensor(operand(frame, 5)).unsqueeze(0), /*dropout_p=*/0.0, kCausal, std::nullopt,
          scale_of(operand(frame, 6)));
      heads(result(frame, 0)).copy_(grad_q);
      heads(result(frame, 1)).copy_(grad_k);
      heads(result(frame, 2)).copy_(grad_v);
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host attention backward: ") + e.what());
  }
}

std::atomic<bool> installed{false};

}  // namespace

std::string host_attention_target(bool backward, bool is_causal) {
  std::string name = backward ? "torch_tpu.host_attention_backward" : "torch_tpu.host_attention";
  return is_causal ? name + "_causal" : name;
}

bool host_attention_enabled() {
  return installed.load(std::memory_order_relaxed) && host_matmul_enabled();
}

bool install_host_attention() {
  if (installed) return true;
  if (!host_matmul_installed()) return false;  // no FFI registration, or switched off
  const pjrt::Plugin& plugin = runtime::Runtime::get().client().plugin();
  struct Entry {
    bool backward, is_causal;
    ffi::Handler* handler;
  };
  const Entry entries[] = {{false, false, &forward<false>},
                           {false, true, &forward<true>},
                           {true, false, &backward<false>},
                           {true, true, &backward<true>}};
  for (const Entry& e : entries) {
    std::string target = host_attention_target(e.backward, e.is_causal);
    try {
      if (!pjrt::register_ffi_handler(plugin, target, "Host", reinterpret_cast<void*>(e.handler))) {
        return false;
      }
    } catch (const std::exception& error) {
      TORCH_WARN(
          "torch_tpu: the CPU plugin refused the host attention kernels, so attention "
          "runs as XLA's code: ",
          error.what());
      return false;
    }
  }
  installed = true;
  return true;
}

}  // namespace tpu::host_kernels
