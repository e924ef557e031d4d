#pragma once
// Owner of one PJRT_LoadedExecutable: a compiled program loaded on one device.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
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
  // those the program declares donated, which are consumed. `device` is null for a
  // program loaded for one device (see pinned_for), which runs there.
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

  // A portable program may get a copy loaded for the one device it keeps running on
  // (runtime::ProgramCache::pin). A run of the copy skips the per-call work a portable
  // run costs the plugin (its compile options and a device assignment, about a tenth of a
  // small op's host time on XLA:CPU). Set at most once; lives as long as this executable.
  struct PinSource {
    bool graph_options = false;  // which of its owner's option sets the copy must load with
    bool from_disk = false;      // loaded, not compiled: serialize() cannot give the copy
  };
  void mark_pinnable(PinSource source) { pin_source_ = source; }
  // Null for a program that is never pinned (a quick tier, a replicated collective).
  const PinSource* pin_source() const { return pin_source_ ? &*pin_source_ : nullptr; }
  const Executable* pinned_for(int device) const {
    return pinned_device_.load(std::memory_order_acquire) == device ? pinned_.get() : nullptr;
  }
  void set_pinned(int device, std::unique_ptr<Executable> copy) const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_LoadedExecutable* executable_;
  size_t num_outputs_ = 0;
  bool quick_ = false;
  std::optional<PinSource> pin_source_;
  mutable std::atomic<uint32_t> runs_{0};
  // Written once, before pinned_device_ publishes it.
  mutable std::unique_ptr<Executable> pinned_;
  mutable std::atomic<int> pinned_device_{-1};
};

}  // namespace tpu::pjrt
