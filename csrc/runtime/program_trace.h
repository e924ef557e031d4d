#pragma once
// The program runs recorded while a profiler is active (torch.profiler): each with its
// op (or fused graph) name, its device, when it was enqueued and when its outputs were
// ready. Torch-free; csrc/aten/profiler.cpp hands the runs to PyTorch's profiler.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pjrt/buffer.h"

namespace tpu::runtime {

struct ProgramRun {
  std::string name;
  int device = 0;
  int64_t start_ns = 0;  // device start: enqueue, or the end of the previous run on the device
  int64_t end_ns = 0;    // when the last output became ready
};

// Nanoseconds since the Unix epoch on the system clock, the clock PyTorch's profiler uses.
int64_t now_ns();

class ProgramTrace {
 public:
  // Drops earlier runs and starts recording.
  void start();
  // Stops recording and waits until every recorded run has finished.
  void stop();
  bool recording() const { return recording_.load(std::memory_order_relaxed); }

  // Records a program enqueued at `enqueued_ns` that finishes when all `outputs` are ready.
  void record(std::string name, int device, int64_t enqueued_ns,
              const std::vector<pjrt::BufferPtr>& outputs);

  // The finished runs in enqueue order. A run's start moves to the latest end, before
  // its own, of an earlier run on its device: time it spent queued behind that program
  // is not its own. (A TPU runs one program at a time; the CPU plugin may run
  // independent programs at once, and those keep their overlap.)
  std::vector<ProgramRun> take();

 private:
  struct Pending;
  std::atomic<bool> recording_{false};
  std::mutex mutex_;
  std::vector<std::shared_ptr<Pending>> runs_;
};

ProgramTrace& program_trace();

// Records the program run that `execute` enqueues when a profiler is active; otherwise
// costs one relaxed atomic load.
class ProfiledRun {
 public:
  // `name`: the op; a fused graph passes its op count too.
  ProfiledRun(const char* name, int device, int fused_ops = 0);
  void done(const std::vector<pjrt::BufferPtr>& outputs);

 private:
  const char* name_;
  int device_;
  int fused_ops_;
  int64_t enqueued_ns_ = 0;
};

}  // namespace tpu::runtime
