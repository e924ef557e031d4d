// TORCH_TPU_CPU_ONE_CORE_COMPILE (compile_parallelism.h): the variable, and the scope that
// confines the compiling thread to one CPU and gives it back its CPUs afterwards.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "runtime/compile_parallelism.h"

namespace tpu::runtime {
namespace {

TEST(OneCoreCompileRequested, IsOffByDefaultAndNamesABadValue) {
  ::unsetenv("TORCH_TPU_CPU_ONE_CORE_COMPILE");
  EXPECT_FALSE(one_core_compile_requested());
  ::setenv("TORCH_TPU_CPU_ONE_CORE_COMPILE", "0", 1);
  EXPECT_FALSE(one_core_compile_requested());
  ::setenv("TORCH_TPU_CPU_ONE_CORE_COMPILE", "1", 1);
  EXPECT_TRUE(one_core_compile_requested());
  ::setenv("TORCH_TPU_CPU_ONE_CORE_COMPILE", "yes", 1);
  try {
    one_core_compile_requested();
    ADD_FAILURE() << "accepted 'yes'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TORCH_TPU_CPU_ONE_CORE_COMPILE must be 0 or 1"),
              std::string::npos);
  }
  ::unsetenv("TORCH_TPU_CPU_ONE_CORE_COMPILE");
}

int allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  return CPU_COUNT(&set);
}

TEST(OneCoreCompile, ConfinesTheThreadToOneCpuAndRestoresItsCpus) {
  std::thread([] {
    const int before = allowed_cpus();
    {
      OneCoreCompile scope;
      EXPECT_EQ(scope.active(), before > 1);
      EXPECT_EQ(allowed_cpus(), 1);
    }
    EXPECT_EQ(allowed_cpus(), before);
  }).join();
}

}  // namespace
}  // namespace tpu::runtime
