#pragma once
// Every path that exists only to make XLA:CPU fast, behind one switch.
//
// On the CPU plugin torch_tpu takes shortcuts that a TPU or GPU never takes. They make the
// CPU platform fast enough to develop and test on, but they also mean the tests would not run
// the code an accelerator runs. TORCH_TPU_XLA_CPU_SHORTCUTS=0 turns all of them off on the CPU
// plugin, so the suite (CI's accelerator-path slice, scripts/test.sh --accelerator-path) runs
// what a TPU or GPU runs. On any other platform they are off whatever the variable says.
//
// The shortcuts, each with why it exists and where it is taken:
// - Host kernels (csrc/host_kernels/, installed by csrc/python/bindings.cpp): float32
//   products, attention, layer norm, convolution and batch norm run PyTorch's CPU kernels
//   inside the XLA program as FFI custom calls, because XLA:CPU's own are several times slower.
// - Reading and writing device memory through raw pointers (csrc/aten/host_access.cpp):
//   .cpu() copies straight out of a CPU buffer's memory, and a host tensor becomes a device
//   buffer without a copy (a zero-copy PJRT_Client_BufferFromHostBuffer). On an
//   accelerator a buffer's pointer is device memory: there every transfer is PJRT's.
// - Lowerings for XLA:CPU's code generator (hlo::Builder::set_for_xla_cpu): column
//   reductions read through an optimization barrier, float32 sine/cosine/log1p as
//   vectorizable polynomials, and a dense store's N-d shape kept (DeferredGraph::record).
// - Tiered and cheaper op compiles (runtime/program_cache.cpp): one-op programs compiled
//   without fusion emitters and at LLVM -O0 first (TORCH_TPU_FAST_OP_COMPILE), and compiled
//   for one core (TORCH_TPU_CPU_ONE_CORE_COMPILE): XLA:CPU's compile dominates small-op time.
// - Pinned programs (TORCH_TPU_PIN_PROGRAMS): a hot op program loaded again for its one
//   device, which XLA:CPU runs inline on the calling thread.
// - Host heap tuning (runtime/host_heap.h): device buffers are host memory on XLA:CPU.
//
// Not a shortcut, so kept with the switch off: the NaN fix of XLA:CPU's fast minimum and
// maximum (hlo::Builder::set_nan_propagating_min_max), a correctness workaround for the CPU
// plugin's compiler; TPU and GPU compilers propagate NaN as StableHLO says.
#include <string>

namespace tpu::runtime {

// The environment variable: 1 (default) or 0.
inline constexpr const char* kXlaCpuShortcutsVariable = "TORCH_TPU_XLA_CPU_SHORTCUTS";

// Whether the CPU-only shortcuts are taken on `platform` (a PJRT platform name): only on
// "cpu", and only while TORCH_TPU_XLA_CPU_SHORTCUTS is not 0. Read once per process; a value
// other than 0 or 1 throws std::invalid_argument naming the variable.
bool xla_cpu_shortcuts(const std::string& platform);

}  // namespace tpu::runtime
