#include "aten/eager_mode.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "runtime/runtime.h"

namespace tpu::aten {

namespace {
std::mutex mutex;  // first read of the environment
// The process-wide mode, read without the lock by every op (-1: not read yet).
std::atomic<int> known_mode{-1};
thread_local std::optional<EagerMode> thread_mode;

bool flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "1";
}
}  // namespace

EagerMode parse_eager_mode(const std::string& text) {
  if (text == "strict" || text.empty()) return EagerMode::Strict;
  if (text == "debug") return EagerMode::Debug;
  if (text == "defer_and_fuse") return EagerMode::DeferAndFuse;
  TORCH_CHECK_VALUE(false, "unknown tpu eager mode '", text,
                    "': expected 'strict', 'debug' or 'defer_and_fuse'");
}

EagerMode eager_mode() {
  if (thread_mode.has_value()) return *thread_mode;
  int known = known_mode.load(std::memory_order_acquire);
  if (known >= 0) return static_cast<EagerMode>(known);
  std::lock_guard<std::mutex> lock(mutex);
  known = known_mode.load(std::memory_order_acquire);
  if (known < 0) {
    const char* text = std::getenv("TORCH_TPU_EAGER_MODE");
    // TorchTPU's names (TORCH_TPU_*) and the short ones are both accepted.
    bool blocking = flag("TORCH_TPU_LAUNCH_BLOCKING") || flag("TPU_LAUNCH_BLOCKING");
    bool fuse = flag("TORCH_TPU_DEFER_AND_FUSE") || flag("TPU_DEFER_AND_FUSE");
    EagerMode mode = blocking ? EagerMode::Debug
                     : fuse   ? EagerMode::DeferAndFuse
                              : parse_eager_mode(text != nullptr ? text : "");
    known = static_cast<int>(mode);
    known_mode.store(known, std::memory_order_release);
  }
  return static_cast<EagerMode>(known);
}

std::optional<EagerMode> set_thread_eager_mode(std::optional<EagerMode> value) {
  std::optional<EagerMode> previous = thread_mode;
  thread_mode = value;
  return previous;
}

void set_eager_mode(EagerMode value) {
  sync();
  std::lock_guard<std::mutex> lock(mutex);
  known_mode.store(static_cast<int>(value), std::memory_order_release);
}

void sync() {
  if (runtime::Runtime::is_initialized()) runtime::Runtime::get().flush_deferred();
}

int64_t defer_max_ops() {
  static const int64_t limit = [] {
    const char* text = std::getenv("TORCH_TPU_DEFER_MAX_OPS");
    int64_t value = text != nullptr ? std::atoll(text) : 0;
    return value > 0 ? value : int64_t{4096};
  }();
  return limit;
}

const char* eager_mode_name(EagerMode value) {
  switch (value) {
    case EagerMode::Debug: return "debug";
    case EagerMode::DeferAndFuse: return "defer_and_fuse";
    case EagerMode::Strict: break;
  }
  return "strict";
}

bool debug_nans() {
  static const bool enabled = flag("TORCH_TPU_DEBUG_NANS");
  return enabled;
}

namespace {
thread_local bool spmd_safe_on = false;
}  // namespace

bool spmd_safe() { return spmd_safe_on; }
void set_spmd_safe(bool on) { spmd_safe_on = on; }

}  // namespace tpu::aten
