#pragma once
// Per-device accounting of the bytes held by live storages against the device's
// capacity, so that an allocation beyond it fails at the call that allocates, as it
// would on a chip. The capacity is the plugin's reported limit (or, where a plugin
// reports none, such as the CPU plugin, half the host's physical memory); TORCH_TPU_HBM_BYTES
// replaces it on every device.
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
  int64_t limit = 0;         // what allocations may reach; 0: unknown, no check
  std::string limit_source;  // where `limit` comes from, for error messages
};

class Memory {
 public:
  // Records `nbytes` on `device`; throws OutOfMemory (and records nothing) past the limit.
  void reserve(int device, int64_t nbytes);
  void release(int device, int64_t nbytes);
  MemoryStats stats(int device);
  void reset_peak(int device);
  // What `device` holds, and where that figure comes from ("reported by the PJRT plugin").
  void set_capacity(int device, int64_t bytes, const std::string& source);
  // A cap on every device in place of its capacity; 0 removes it. Initialised from
  // TORCH_TPU_HBM_BYTES.
  void set_limit(int64_t bytes);

 private:
  // The device's counters, with its limit and the limit's source filled in.
  MemoryStats& at(int device);
  // The counters alone, and the limit alone: what an allocation needs.
  MemoryStats& counters(int device);
  int64_t limit_of(int device);

  struct Capacity {
    int64_t bytes = 0;
    std::string source;
  };

  std::mutex mutex_;
  std::vector<MemoryStats> devices_;
  std::vector<Capacity> capacities_;
  int64_t limit_ = -1;  // -1: not read from the environment yet
};

Memory& memory();

// "1.50 GiB": sizes in messages, as CUDA's out-of-memory errors write them.
std::string format_bytes(int64_t bytes);

// The host's physical memory: the CPU plugin's devices allocate from it.
int64_t host_physical_memory();

}  // namespace tpu::runtime
