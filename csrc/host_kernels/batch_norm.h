#pragma once
// Training-mode batch norm on the CPU platform, run by PyTorch's CPU kernels as typed-FFI custom
// calls, like the host matmul (matmul.h) and under the same switch (TORCH_TPU_HOST_MATMUL).
// XLA:CPU's per-channel statistics over [N, C, L] were two unfused passes per reduction; the
// kernel is PyTorch's own, results included.
//
// Forward:  (x [N, C, L], [weight [C]], [bias [C]], [running_mean [C], running_var [C]],
//            flags s64[3] = {has weight, has bias, has running statistics}, momentum f64[],
//            eps f64[])
//           -> (y, save_mean [C], save_invstd [C][, running_mean, running_var updated])
// Backward: (grad_y, x, [weight], save_mean, save_invstd,
//            flags s64[4] = {has weight, grad_x?, grad_weight?, grad_bias?}, eps f64[])
//           -> the gradients asked for, in the order x, weight, bias
// float32 only.
#include <string>

namespace tpu::host_kernels {

// Registers the batch-norm handlers with the running CPU plugin; returns whether programs may
// call them (false where the host matmul could not be installed either).
bool install_host_batch_norm();
// Whether programs built from now on call the kernels: installed, and host kernels enabled
// (host_matmul_enabled).
bool host_batch_norm_enabled();
// The custom-call target of the forward or backward kernel.
std::string host_batch_norm_target(bool backward);

}  // namespace tpu::host_kernels
