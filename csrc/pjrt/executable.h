#pragma once
// Owner of one PJRT_LoadedExecutable: a compiled program loaded on one device.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "buffer.h"

namespace tpu::pjrt {

class Executable {
 public:
  Executable(std::shared_ptr<const Plugin> plugin, PJRT_LoadedExecutable* executable);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  size_t num_outputs() const { return num_outputs_; }

  // Enqueues one run on `device` (where the inputs must live) and returns its
  // outputs at once; they become ready asynchronously. Inputs are only read, except
  // those the program declares donated, which are consumed.
  // `launch_id` identifies one run of a replicated program across its devices: every
  // participant of one collective passes the same id (PJRT_ExecuteOptions.launch_id).
  std::vector<BufferPtr> execute(const std::vector<PJRT_Buffer*>& inputs, PJRT_Device* device,
                                 int launch_id = 0) const;

  // The compiled program as bytes that deserialize() turns back into an executable
  // with the same plugin build.
  std::string serialize() const;

  // Whether this is a quickly compiled first version that its owner replaces once it has
  // run often (see runtime::ProgramCache); count_run() returns the runs so far, this one
  // included.
  void mark_quick() { quick_ = true; }
  bool quick() const { return quick_; }
  uint32_t count_run() const { return runs_.fetch_add(1, std::memory_order_relaxed) + 1; }

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_LoadedExecutable* executable_;
  size_t num_outputs_ = 0;
  bool quick_ = false;
  mutable std::atomic<uint32_t> runs_{0};
};

}  // namespace tpu::pjrt
