// Which programs XLA:CPU compiles for one core (compile_parallelism.h): the size of their
// largest tensor, read from the program text, and the scope that confines the compiling
// thread to one CPU and gives it back its CPUs afterwards.
#include <gtest/gtest.h>
#include <sched.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

#include "runtime/compile_parallelism.h"

namespace tpu::runtime {
namespace {

TEST(LargestTensorBytes, ReadsEveryTensorTypeOfTheText) {
  EXPECT_EQ(largest_tensor_bytes("func.func @main() -> ()"), 0);
  EXPECT_EQ(largest_tensor_bytes("%0 : tensor<f32>"), 4);
  EXPECT_EQ(largest_tensor_bytes("(tensor<512x64xf32>, tensor<8xf32>) -> tensor<512x256xf32>"),
            512 * 256 * 4);
  EXPECT_EQ(largest_tensor_bytes("tensor<16xi1> tensor<4xbf16>"), 16);
  EXPECT_EQ(largest_tensor_bytes("tensor<2x3xcomplex<f64>> tensor<5xi64>"), 2 * 3 * 16);
  EXPECT_EQ(largest_tensor_bytes("tensor<3x1000xui8> tensor<10xf8E4M3FN>"), 3000);
  // A dimension only known at run time could be of any size.
  EXPECT_EQ(largest_tensor_bytes("tensor<?x4xf32>"), INT64_MAX);
}

TEST(OneCoreCompileBelowBytes, ComesFromTheEnvironmentAndIsOffByDefault) {
  ::unsetenv("TORCH_TPU_CPU_SMALL_PROGRAM_BYTES");
  EXPECT_EQ(one_core_compile_below_bytes(), 0);
  ::setenv("TORCH_TPU_CPU_SMALL_PROGRAM_BYTES", "2097152", 1);
  EXPECT_EQ(one_core_compile_below_bytes(), 2097152);
  for (const char* bad : {"2MiB", "-1", "x"}) {
    ::setenv("TORCH_TPU_CPU_SMALL_PROGRAM_BYTES", bad, 1);
    try {
      one_core_compile_below_bytes();
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("TORCH_TPU_CPU_SMALL_PROGRAM_BYTES"), std::string::npos);
    }
  }
  ::unsetenv("TORCH_TPU_CPU_SMALL_PROGRAM_BYTES");
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
