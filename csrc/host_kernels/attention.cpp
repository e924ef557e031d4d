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

namespace tpu::host_kernels {

namespace {

// A [n, rows, cols] buffer as the [batch 1, heads n, rows, cols] tensor the kernel takes, or a
// [batch, rows, heads, cols] one as the [batch, heads, rows, cols] view of it.
template <bool kHeadsSecond>
at::Tensor heads(const ffi::Buffer& buffer) {
  return kHeadsSecond ? as_tensor(buffer).transpose(1, 2) : as_tensor(buffer).unsqueeze(0);
}

// The logsumexp, [batch, heads, L] in either layout.
template <bool kHeadsSecond>
at::Tensor logsumexp(const ffi::Buffer& buffer) {
  return kHeadsSecond ? as_tensor(buffer) : as_tensor(buffer).unsqueeze(0);
}

// The forward's multiply-adds: two products over every (query element, key) pair. The keys'
// length is their dimension 1 in either layout ([n, S, E] or [batch, S, heads, E]).
int64_t work(const ffi::Buffer& query, const ffi::Buffer& key) {
  int64_t query_elements = 1;
  for (int64_t i = 0; i < query.rank; ++i) query_elements *= query.dims[i];
  return 2 * query_elements * key.dims[1];
}

template <bool kCausal, bool kHeadsSecond>
ffi::Error* forward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  if (frame->args.size != 4 || frame->rets.size != 2) {
    return fail(frame, "torch_tpu host attention: expected 4 operands and 2 results");
  }
  try {
    run_kernel(work(operand(frame, 0), operand(frame, 1)), [&] {
      auto [out, lse] = at::cpu::_scaled_dot_product_flash_attention_for_cpu(
          heads<kHeadsSecond>(operand(frame, 0)), heads<kHeadsSecond>(operand(frame, 1)),
          heads<kHeadsSecond>(operand(frame, 2)),
          /*dropout_p=*/0.0, kCausal, std::nullopt, scalar_of(operand(frame, 3)));
      heads<kHeadsSecond>(result(frame, 0)).copy_(out);
      logsumexp<kHeadsSecond>(result(frame, 1)).copy_(lse);
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host attention: ") + e.what());
  }
}

template <bool kCausal, bool kHeadsSecond>
ffi::Error* backward(ffi::CallFrame* frame) {
  if (not_an_execution(frame)) return nullptr;
  if (frame->args.size != 7 || frame->rets.size != 3) {
    return fail(frame, "torch_tpu host attention backward: expected 7 operands and 3 results");
  }
  try {
    run_kernel(3 * work(operand(frame, 1), operand(frame, 2)), [&] {
      auto [grad_q, grad_k, grad_v] = at::cpu::_scaled_dot_product_flash_attention_for_cpu_backward(
          heads<kHeadsSecond>(operand(frame, 0)), heads<kHeadsSecond>(operand(frame, 1)),
          heads<kHeadsSecond>(operand(frame, 2)), heads<kHeadsSecond>(operand(frame, 3)),
          heads<kHeadsSecond>(operand(frame, 4)), logsumexp<kHeadsSecond>(operand(frame, 5)),
          /*dropout_p=*/0.0, kCausal, std::nullopt, scalar_of(operand(frame, 6)));
      heads<kHeadsSecond>(result(frame, 0)).copy_(grad_q);
      heads<kHeadsSecond>(result(frame, 1)).copy_(grad_k);
      heads<kHeadsSecond>(result(frame, 2)).copy_(grad_v);
    });
    return nullptr;
  } catch (const std::exception& e) {
    return fail(frame, std::string("torch_tpu host attention backward: ") + e.what());
  }
}

KernelSet kernels{"attention"};

}  // namespace

std::string host_attention_target(bool backward, bool is_causal, bool heads_second) {
  std::string name = backward ? "torch_tpu.host_attention_backward" : "torch_tpu.host_attention";
  if (is_causal) name += "_causal";
  return heads_second ? name + "_heads_second" : name;
}

bool host_attention_enabled() { return kernels.enabled(); }

bool install_host_attention() {
  std::vector<std::pair<std::string, ffi::Handler*>> handlers;
  for (bool heads_second : {false, true}) {
    for (bool causal : {false, true}) {
      handlers.emplace_back(host_attention_target(false, causal, heads_second),
                            causal
                                ? (heads_second ? &forward<true, true> : &forward<true, false>)
                                : (heads_second ? &forward<false, true> : &forward<false, false>));
      handlers.emplace_back(
          host_attention_target(true, causal, heads_second),
          causal ? (heads_second ? &backward<true, true> : &backward<true, false>)
                 : (heads_second ? &backward<false, true> : &backward<false, false>));
    }
  }
  return kernels.install(handlers);
}

}  // namespace tpu::host_kernels
