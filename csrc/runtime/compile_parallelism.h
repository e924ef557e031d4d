#pragma once
// XLA:CPU splits each loop it compiles into as many tasks as it has CPUs once its cost model
// finds enough work (about 256 KiB of output, or 20 KiB moved by a fusion with more than one
// flop per byte). A small model's ops sit just above that: the GPT step's [512, 64] fusions
// became two tasks each, and handing half of a 10 us loop to another thread costs more than
// it saves. No compile option sets that count through PJRT: XLA derives it from the CPUs
// the compiling thread may use (part of it, and the number of threads generating machine
// code, only at its first compile in the process). TORCH_TPU_CPU_ONE_CORE_COMPILE=1
// compiles on a thread allowed on one CPU; the programs still run on all of them. On 2
// cores the GPT step then took 5.47 ms instead of 5.84 compiled and 5.43 instead of 5.90
// in defer_and_fuse, but every compile takes about twice as long (3.1 s instead of 1.9 s
// for the step's programs: code is generated on one thread), and large tensors lose the
// split (a 4 MiB elementwise graph: 2.2 ms whole against 1.6 ms split). Off by default.

namespace tpu::runtime {

// Whether TORCH_TPU_CPU_ONE_CORE_COMPILE asks for it (unset or 0: no, 1: yes); throws
// std::invalid_argument naming the variable for any other value.
bool one_core_compile_requested();

// While alive, the calling thread may run on one CPU only (the first it was allowed), so
// that a compile it runs sees one core; restores the thread's CPUs when destroyed. Does
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
#if defined(__linux__)
  unsigned char saved_[128] = {};  // the thread's cpu_set_t while active
#endif
};

}  // namespace tpu::runtime
