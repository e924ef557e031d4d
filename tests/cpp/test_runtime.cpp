#include <gtest/gtest.h>

#include "hlo/builder.h"
#include "plugin_path.h"
#include "runtime/device_buffer.h"
#include "runtime/memory.h"
#include "runtime/metrics.h"
#include "runtime/program_cache.h"

namespace tpu::runtime {
namespace {

using tpu::testing::shared_client;

TEST(Memory, CountsAndReleases) {
  Memory m;
  m.set_limit(0);
  m.reserve(0, 100);
  m.reserve(0, 50);
  EXPECT_EQ(m.stats(0).allocated, 150);
  m.release(0, 100);
  EXPECT_EQ(m.stats(0).allocated, 50);
  EXPECT_EQ(m.stats(0).peak, 150);
  m.reset_peak(0);
  EXPECT_EQ(m.stats(0).peak, 50);
}

TEST(Memory, CapRaisesOutOfMemoryAndKeepsWorking) {
  Memory m;
  m.set_limit(1000);
  m.reserve(1, 600);
  EXPECT_THROW(m.reserve(1, 600), OutOfMemory);
  EXPECT_EQ(m.stats(1).allocated, 600);
  m.release(1, 600);
  m.reserve(1, 900);
  EXPECT_EQ(m.stats(1).allocated, 900);
}

TEST(DeviceStorage, StartsEmptyAndTakesBuffers) {
  memory().reserve(0, 8);
  DeviceStorage storage(0, 8);  // releases its 8 bytes when destroyed
  EXPECT_FALSE(storage.has_buffer());
  float data[2] = {1, 2};
  storage.set_buffer(shared_client().buffer_from_host(data, PJRT_Buffer_Type_F32, {2}, 0),
                     hlo::ElementType::F32);
  EXPECT_TRUE(storage.has_buffer());
  EXPECT_EQ(storage.elements(), 2);
  EXPECT_THROW(storage.set_buffer(nullptr, hlo::ElementType::C128), std::logic_error);
}

TEST(ProgramCache, CompilesOncePerProgram) {
  ProgramCache cache(shared_client());
  hlo::Builder b;
  hlo::Value x = b.parameter(hlo::TensorType{hlo::ElementType::F32, {3}});
  std::string text = b.module_text({b.unary("negate", x)});
  int64_t before = metrics().snapshot().compiles;
  auto first = cache.get(text);
  auto second = cache.get(text);
  EXPECT_EQ(first, second);
  EXPECT_EQ(metrics().snapshot().compiles - before, 1);
  EXPECT_EQ(cache.size(), 1u);
}

}  // namespace
}  // namespace tpu::runtime
