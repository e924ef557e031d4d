#pragma once
// Per-device accounting of the bytes held by live storages, and the optional cap
// (TORCH_TPU_HBM_BYTES) that makes an allocation beyond it fail as it would on a chip.
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpu::runtime {

class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MemoryStats {
  int64_t allocated = 0;    // bytes of live storages
  int64_t peak = 0;         // high-water mark of `allocated` since the last reset
  int64_t allocations = 0;  // live storages
  int64_t total_allocations = 0;
  int64_t limit = 0;  // 0: no cap
};

class Memory {
 public:
  // Records `nbytes` on `device`; throws OutOfMemory (and records nothing) past the cap.
  void reserve(int device, int64_t nbytes);
  void release(int device, int64_t nbytes);
  MemoryStats stats(int device);
  void reset_peak(int device);
  // 0 removes the cap. Initialised from TORCH_TPU_HBM_BYTES.
  void set_limit(int64_t bytes);

 private:
  MemoryStats& at(int device);

  std::mutex mutex_;
  std::vector<MemoryStats> devices_;
  int64_t limit_ = -1;  // -1: not read from the environment yet
};

Memory& memory();

}  // namespace tpu::runtime
