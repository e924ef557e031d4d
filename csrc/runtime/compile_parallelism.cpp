#include "runtime/compile_parallelism.h"

#include <cstring>

#if defined(__linux__)
#include <sched.h>
#endif

#include "runtime/env_switch.h"

namespace tpu::runtime {

bool one_core_compile_requested() { return env_switch("TORCH_TPU_CPU_ONE_CORE_COMPILE", false); }

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
