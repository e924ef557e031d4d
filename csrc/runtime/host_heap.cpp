#include "runtime/host_heap.h"

#include <atomic>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "runtime/env_switch.h"

namespace tpu::runtime {

namespace {

constexpr int kMiB = 1 << 20;
std::atomic<bool> tuned{false};

}  // namespace

bool host_heap_tuning_requested() { return env_switch("TORCH_TPU_HOST_HEAP_TUNING", true); }

bool tune_host_heap_for_device_buffers() {
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(__GLIBC__)
    // A fixed mmap threshold also stops glibc from moving it (and the trim threshold
    // with it) as buffers are freed.
    const bool applied = mallopt(M_MMAP_THRESHOLD, 32 * kMiB) == 1 &&
                         mallopt(M_TRIM_THRESHOLD, 256 * kMiB) == 1 &&
                         mallopt(M_TOP_PAD, 64 * kMiB) == 1;
    tuned = applied;
#endif
  });
  return tuned;
}

bool host_heap_tuned() { return tuned; }

}  // namespace tpu::runtime
