#pragma once
// What every host kernel needs to run as a typed-FFI custom call of XLA:CPU: answering XLA's
// metadata query, returning errors through the FFI's API table, seeing buffers as CPU tensors,
// and keeping PyTorch's thread pool off XLA's worker threads.
#include <ATen/core/Tensor.h>
#include <c10/util/ParallelGuard.h>

#include <string>

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

// A CPU tensor over `buffer`'s memory (row-major, as custom-call operands are laid out); it does
// not own the memory, which lives as long as the call.
at::Tensor as_tensor(const ffi::Buffer& buffer);

// Whether the calling thread is the process's main thread, the one whose OpenMP team PyTorch's
// CPU kernels use. XLA runs small programs inline on the thread that launches them; on the main
// thread a kernel then runs on PyTorch's own threads, exactly as CPU eager's does.
bool on_main_thread();

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

}  // namespace tpu::host_kernels
