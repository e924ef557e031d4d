#include "runtime/env_switch.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace tpu::runtime {

bool env_switch(const char* name, bool when_unset) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return when_unset;
  const std::string v(value);
  if (v == "0") return false;
  if (v == "1") return true;
  throw std::invalid_argument(std::string(name) + " must be 0 or 1, got '" + v + "'");
}

}  // namespace tpu::runtime
