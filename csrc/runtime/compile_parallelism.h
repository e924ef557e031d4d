#pragma once
// XLA:CPU splits each loop it compiles into as many tasks as the compiling thread has CPUs
// once its cost model finds enough work (about 256 KiB of output, or 20 KiB moved by a
// fusion with more than one flop per byte). A small model's ops sit just above that: the
// GPT step's [512, 64] fusions became two tasks each, and handing half of a 10 us loop to
// another thread costs more than it saves. Compiled for one core, the GPT step's programs
// ran 6-10% faster on 2 cores; tensors of a few MiB still gain from the split (a 4 MiB
// elementwise graph: 1.6 ms split, 2.2 ms whole). No compile option sets that count through
// PJRT, so such a program is compiled on a thread allowed on one CPU; it runs on all of them
// as before. The price is compile time: XLA then also generates machine code on one thread
// (the GPT step's programs took 3.2 s instead of 1.8 s), hence off by default.
#include <cstdint>
#include <string>

namespace tpu::runtime {

// The largest tensor type in StableHLO text, in bytes (0 if it names none). Counts every
// `tensor<AxBx...xT>` it meets, operands, results and region arguments alike.
int64_t largest_tensor_bytes(const std::string& program);

// Programs whose largest tensor is below this many bytes are compiled for one core on the
// CPU platform: TORCH_TPU_CPU_SMALL_PROGRAM_BYTES=N (unset or 0: never). Throws
// std::invalid_argument naming the variable for a bad value.
int64_t one_core_compile_below_bytes();

// While alive, the calling thread may run on one CPU only (the first it was allowed), so
// that XLA:CPU compiles for one core; restores the thread's CPUs when destroyed. Does
// nothing where the thread already has one CPU or its CPU set cannot be changed.
class OneCoreCompile {
 public:
  OneCoreCompile();
  ~OneCoreCompile();
  OneCoreCompile(const OneCoreCompile&) = delete;
  OneCoreCompile& operator=(const OneCoreCompile&) = delete;
  bool active() const { return active_; }

 private:
  bool active_ = false;
  std::string saved_;  // the thread's cpu_set_t, as bytes, while active
};

}  // namespace tpu::runtime
