#include "aten/eager_mode.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <mutex>
#include <optional>

namespace tpu::aten {

namespace {
std::mutex mutex;
std::optional<EagerMode> mode;

bool flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "1";
}
}  // namespace

EagerMode parse_eager_mode(const std::string& text) {
  if (text == "strict" || text.empty()) return EagerMode::Strict;
  if (text == "debug") return EagerMode::Debug;
  TORCH_CHECK_NOT_IMPLEMENTED(text != "defer_and_fuse",
                              "the defer_and_fuse eager mode is not implemented yet; use "
                              "'strict' (the default) or 'debug'");
  TORCH_CHECK_VALUE(false, "unknown tpu eager mode '", text, "': expected 'strict' or 'debug'");
}

EagerMode eager_mode() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!mode.has_value()) {
    const char* text = std::getenv("TORCH_TPU_EAGER_MODE");
    mode = flag("TPU_LAUNCH_BLOCKING") ? EagerMode::Debug
                                       : parse_eager_mode(text != nullptr ? text : "");
  }
  return *mode;
}

void set_eager_mode(EagerMode value) {
  std::lock_guard<std::mutex> lock(mutex);
  mode = value;
}

const char* eager_mode_name(EagerMode value) {
  return value == EagerMode::Debug ? "debug" : "strict";
}

bool debug_nans() {
  static const bool enabled = flag("TORCH_TPU_DEBUG_NANS");
  return enabled;
}

}  // namespace tpu::aten
