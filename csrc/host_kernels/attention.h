#pragma once
// Scaled dot-product attention on the CPU platform, run by PyTorch's CPU flash-attention kernel
// instead of the XLA:CPU code for the same math, which took about 2x its time per GPT layer
// (scores, softmax and products as a dozen separate loops). Programs call it as a typed-FFI
// custom call, like the host matmul (matmul.h), under the same switch (TORCH_TPU_HOST_MATMUL).
//
// Forward:  (q [n, L, E], k [n, S, E], v [n, S, E], scale []) -> (out [n, L, E], lse [n, L])
// Backward: (grad_out, q, k, v, out, lse, scale) -> (grad_q, grad_k, grad_v)
// float32 only; no mask but the causal one, no dropout.
//
// The "heads second" targets take and give q, k, v, out and their gradients as [batch, L, heads,
// E] arrays instead, the order a model's q/k/v projection produces them in and its output
// projection reads them (x.view(B, L, H, E).transpose(1, 2)): the kernel reads that order by
// strides, as on PyTorch's CPU, and the program needs no transposes around the call.
#include <string>

namespace tpu::host_kernels {

// Registers the attention handlers with the running CPU plugin; returns whether programs may
// call them (false where the host matmul could not be installed either).
bool install_host_attention();
// Whether programs built from now on call the kernels: installed, and host kernels enabled
// (host_matmul_enabled).
bool host_attention_enabled();
// The custom-call target of the forward or backward kernel, with or without the causal mask,
// in either layout.
std::string host_attention_target(bool backward, bool is_causal, bool heads_second);

}  // namespace tpu::host_kernels
