#include "runtime/compile_parallelism.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__linux__)
#include <sched.h>
#endif

namespace tpu::runtime {

bool one_core_compile_requested() {
  const char* value = std::getenv("TORCH_TPU_CPU_ONE_CORE_COMPILE");
  if (value == nullptr || *value == '\0') return false;
  const std::string v(value);
  if (v == "0") return false;
  if (v == "1") return true;
  throw std::invalid_argument("TORCH_TPU_CPU_ONE_CORE_COMPILE must be 0 or 1, got '" + v + "'");
}

#if defined(__linux__)
static_assert(sizeof(cpu_set_t) <= 128, "OneCoreCompile::saved_ holds a cpu_set_t");

OneCoreCompile::OneCoreCompile() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) <= 1) return;
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &allowed)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return;
  std::memcpy(saved_, &allowed, sizeof allowed);
  active_ = true;
}

OneCoreCompile::~OneCoreCompile() {
  if (!active_) return;
  cpu_set_t allowed;
  std::memcpy(&allowed, saved_, sizeof allowed);
  sched_setaffinity(0, sizeof allowed, &allowed);
}
#else
OneCoreCompile::OneCoreCompile() = default;
OneCoreCompile::~OneCoreCompile() = default;
#endif

}  // namespace tpu::runtime
