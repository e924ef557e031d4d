#pragma once
// Layer norm on the CPU platform, run by PyTorch's CPU kernels (at::cpu::native_layer_norm
// and its backward) as typed-FFI custom calls, like the host matmul
// (matmul.h) and under the same switch (TORCH_TPU_HOST_MATMUL). XLA:CPU splits each of the
// norm's two row reductions into two unfused loops, so its layer norm was eight separate loops
// per call and its backward more; the kernel is one pass, and its results are the CPU's, to the
// bit.
//
// Forward:  (x [M, N], [weight [N], [bias [N]]], eps []) -> (y [M, N], mean [M], rstd [M])
// Backward: (grad_y, x, mean, rstd[, weight]) -> (grad_x[, grad_weight, grad_bias])
// float32 only; the operand count says which of weight and bias are present.
#include <string>

namespace tpu::host_kernels {

// Registers the layer-norm handlers with the running CPU plugin; returns whether programs may
// call them (false where the host matmul could not be installed either).
bool install_host_layer_norm();
// Whether programs built from now on call the kernels: installed, and host kernels enabled
// (host_matmul_enabled).
bool host_layer_norm_enabled();
// The custom-call target of the forward or backward kernel.
std::string host_layer_norm_target(bool backward);

}  // namespace tpu::host_kernels
