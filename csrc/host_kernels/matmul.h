#pragma once
// Matrix products on the CPU platform run by PyTorch's CPU BLAS instead of XLA:CPU's own dot
// emitter, which is 2-5x slower at the sizes of a small model's layers (README, "Platforms").
// Programs call them as typed-FFI custom calls (hlo::Builder::dot_general emits them once
// set_host_matmul is on); the handlers are registered with the plugin at start-up.
#include <cstdint>

namespace tpu::host_kernels {

// Registers the matmul handlers with the running CPU plugin. Returns whether programs may call
// them: false when the plugin has no FFI handler registration, or TORCH_TPU_HOST_MATMUL=0.
bool install_host_matmul();
// Whether install_host_matmul succeeded in this process.
bool host_matmul_installed();
// Whether programs built from now on call the kernels: installed and not switched off by
// set_host_matmul_enabled (tests of what XLA's own dot_general carries switch them off).
bool host_matmul_enabled();
void set_host_matmul_enabled(bool on);
// How many products were split over XLA's thread pool (for tests).
int64_t host_matmul_split_products();

}  // namespace tpu::host_kernels
