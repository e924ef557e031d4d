#pragma once
// What every host kernel needs to run as a typed-FFI custom call of XLA:CPU: answering XLA's
// metadata query, returning errors through the FFI's API table, seeing buffers as CPU tensors,
// and keeping PyTorch's thread pool off XLA's worker threads.
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/ParallelGuard.h>

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "xla_ffi.h"

// MKL's per-thread thread count (its C entry point). PyTorch's x86 wheels link MKL in and
// export it; elsewhere (OpenBLAS, Accelerate) the weak reference stays null.
extern "C" __attribute__((weak)) int MKL_Set_Num_Threads_Local(int count);
// OpenMP's per-thread team size, which at::parallel_for reads (at::get_num_threads); weak for
// builds of PyTorch without OpenMP.
extern "C" __attribute__((weak)) void omp_set_num_threads(int count);
extern "C" __attribute__((weak)) int omp_get_max_threads();

namespace tpu::host_kernels {

// Whether `frame` is XLA's query for the handler's API version (answered in the frame), or a
// stage other than execution: the handler then returns nullptr without running.
bool not_an_execution(ffi::CallFrame* frame);

// An FFI error carrying `message`, for the handler to return.
ffi::Error* fail(const ffi::CallFrame* frame, const std::string& message);

// The call's operand or result `i`.
inline const ffi::Buffer& operand(const ffi::CallFrame* frame, int64_t i) {
  return *static_cast<const ffi::Buffer*>(frame->args.args[i]);
}
inline const ffi::Buffer& result(const ffi::CallFrame* frame, int64_t i) {
  return *static_cast<const ffi::Buffer*>(frame->rets.args[i]);
}

// A CPU tensor over `buffer`'s memory (row-major, as custom-call operands are laid out); it does
// not own the memory, which lives as long as the call.
at::Tensor as_tensor(const ffi::Buffer& buffer);

// The value of a float32 or float64 scalar operand (a scale, an epsilon, a momentum).
double scalar_of(const ffi::Buffer& buffer);
// The elements of an int64 vector operand (a kernel's settings or flags), after checking that
// it has `count` of them (any count when -1).
c10::ArrayRef<int64_t> int64s_of(const ffi::Buffer& buffer, int64_t count = -1);

// Whether the calling thread is the process's main thread, the one whose OpenMP team PyTorch's
// CPU kernels use. XLA runs small programs inline on the thread that launches them.
bool on_main_thread();

// The work (multiply-adds, or about that in other arithmetic) from which a kernel on the main
// thread runs on PyTorch's OpenMP team. Below it the team would wake for microseconds of work and
// then spin, taking the second core from XLA's workers and the autograd thread: a strict-mode
// GPT step went from 8.8 to 11.4 ms when its 512x64 layer norms ran on the team. From 2M up the
// team pays (a lone 512x64x256 product in strict mode: 46 us on it, 88 us on one thread, 42 us on
// PyTorch's CPU), and 32M measured no better for the GPT and CNN steps.
constexpr int64_t kTeamWork = int64_t{2} << 20;

// Runs PyTorch's CPU kernels on the calling thread only, for the scope's lifetime. On any thread
// but the main one (XLA's workers, PyTorch's autograd threads for the device) a parallel kernel
// starts an OpenMP team per thread, whose threads spin after each call and starve PyTorch's own
// (the GPT step's CPU eager baseline ran 2.2x slower beside it).
// Both MKL and OpenMP are told: at::parallel_for (flash attention's loops) would otherwise start
// a team of its own.
class OneThread {
 public:
  OneThread();
  ~OneThread();
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  c10::ParallelGuard in_parallel_{true};
  int previous_mkl_ = 0;
  int previous_omp_ = 0;
};

// How a host kernel calls PyTorch: on plain CPU tensors, below autograd (there is nothing to
// record) and outside any autocast region of the calling thread (torch.autocast("cpu") around
// eager code that runs a program inline would otherwise recast the kernel's float32 operands).
class KernelScope {
 private:
  at::AutoDispatchBelowADInplaceOrView below_autograd_;
  c10::impl::ExcludeDispatchKeyGuard no_autocast_{c10::autocast_dispatch_keyset};
};

// Runs `body`, a kernel of about `work` multiply-adds, in a KernelScope: with PyTorch's threads
// on the main thread when the work is worth a team (kTeamWork), on the calling thread alone
// otherwise.
template <typename Body>
void run_kernel(int64_t work, const Body& body) {
  KernelScope scope;
  if (work >= kTeamWork && on_main_thread()) return body();
  OneThread one_thread;
  body();
}

// One group of host kernels (an op's forward and backward): whether the plugin has them and
// programs may call them. They ride on the host matmul's registration and switch
// (TORCH_TPU_HOST_MATMUL): where that is not installed or is switched off, neither are they.
class KernelSet {
 public:
  explicit KernelSet(const char* kernels) : kernels_(kernels) {}
  // Registers `handlers` (register_handlers) once; returns whether programs may call them.
  bool install(const std::vector<std::pair<std::string, ffi::Handler*>>& handlers);
  // Installed, and host kernels enabled (host_matmul_enabled).
  bool enabled() const;

 private:
  const char* kernels_;
  std::atomic<bool> installed_{false};
};

// Registers each (custom-call target, handler) pair with the running CPU plugin for the "Host"
// platform. Returns false, after a warning naming `kernels` when the plugin refused one, if any
// registration failed: programs must then not call these targets.
bool register_handlers(const std::vector<std::pair<std::string, ffi::Handler*>>& handlers,
                       const char* kernels);

}  // namespace tpu::host_kernels
