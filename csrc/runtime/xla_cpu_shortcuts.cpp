#include "runtime/xla_cpu_shortcuts.h"

#include "runtime/env_switch.h"

namespace tpu::runtime {

bool xla_cpu_shortcuts(const std::string& platform) {
  // Read once: a process's programs and cache keys must not change mode halfway.
  static const bool requested = env_switch(kXlaCpuShortcutsVariable, true);
  return requested && platform == "cpu";
}

}  // namespace tpu::runtime
