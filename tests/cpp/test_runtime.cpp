#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "hlo/builder.h"
#include "plugin_path.h"
#include "runtime/constant_buffers.h"
#include "runtime/device_buffer.h"
#include "runtime/memory.h"
#include "runtime/metrics.h"
#include "runtime/process_mappings.h"
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

TEST(Memory, CapacityLimitsEachDeviceAndTheCapReplacesIt) {
  Memory m;
  m.set_limit(0);  // whatever TORCH_TPU_HBM_BYTES says, this test sets its own
  m.set_capacity(0, 1000, "reported by the test");
  m.reserve(0, 700);
  try {
    m.reserve(0, 400);
    FAIL() << "an allocation beyond the capacity succeeded";
  } catch (const OutOfMemory& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("Tried to allocate 400 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("reported by the test"), std::string::npos) << message;
    EXPECT_NE(message.find("300 bytes is free"), std::string::npos) << message;
  }
  EXPECT_EQ(m.stats(0).limit, 1000);
  EXPECT_EQ(m.stats(1).limit, 0);  // no capacity known: nothing to check against
  m.reserve(1, 1 << 20);
  m.set_limit(2000);  // the cap replaces every device's capacity
  m.reserve(0, 400);
  EXPECT_EQ(m.stats(0).limit, 2000);
  EXPECT_EQ(m.stats(1).limit, 2000);
  m.set_limit(0);
  EXPECT_EQ(m.stats(0).limit, 1000);
}

TEST(Memory, FormatsSizesAsCudaDoes) {
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(int64_t{1} << 40), "1.00 TiB");
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

TEST(ProcessMappings, CountsEachNewMapping) {
  const size_t before = count_process_mappings();
  ASSERT_GT(before, 0u);
  // Alternate protections so that neighbouring mappings cannot merge into one.
  std::vector<void*> regions;
  for (int i = 0; i < 40; ++i) {
    void* region = mmap(nullptr, 4096, i % 2 ? PROT_READ : PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(region, MAP_FAILED);
    regions.push_back(region);
  }
  EXPECT_GE(count_process_mappings(), before + 20);
  for (void* region : regions) munmap(region, 4096);
  EXPECT_GT(process_mapping_limit(), 0u);
}

TEST(ProcessMappings, KeepsTheShareOfProgramsThatFitsTheTarget) {
  // 1000 programs hold 40000 - 1000 mappings; 20000 - 1000 fit: about half of them.
  EXPECT_EQ(programs_to_keep(1000, 40000, 1000, 20000, 64), 487u);
  // Under the target: all stay. Never below the floor (a cap: above the count keeps all).
  EXPECT_EQ(programs_to_keep(1000, 15000, 1000, 20000, 64), 1000u);
  EXPECT_EQ(programs_to_keep(1000, 60000, 19000, 20000, 64), 64u);
  EXPECT_EQ(programs_to_keep(10, 60000, 1000, 20000, 64), 64u);
  EXPECT_EQ(programs_to_keep(0, 60000, 1000, 20000, 64), 64u);
}

float read_float(const pjrt::BufferPtr& buffer) {
  float value = 0;
  buffer->to_host(&value, sizeof value);
  return value;
}

std::vector<unsigned char> float_bytes(float value) {
  std::vector<unsigned char> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

TEST(ConstantBuffers, AValueIsUploadedOnceAndHoldsItsBytes) {
  ConstantBuffers constants(shared_client());
  pjrt::BufferPtr half = constants.get(float_bytes(0.5f), PJRT_Buffer_Type_F32, {}, 0);
  pjrt::BufferPtr again = constants.get(float_bytes(0.5f), PJRT_Buffer_Type_F32, {}, 0);
  pjrt::BufferPtr quarter = constants.get(float_bytes(0.25f), PJRT_Buffer_Type_F32, {}, 0);
  EXPECT_EQ(half, again);
  EXPECT_NE(half, quarter);
  EXPECT_EQ(read_float(half), 0.5f);
  EXPECT_EQ(read_float(quarter), 0.25f);
  EXPECT_EQ(constants.size(), 2u);
}

TEST(ConstantBuffers, TypeAndShapeArePartOfTheKey) {
  ConstantBuffers constants(shared_client());
  std::vector<unsigned char> bytes = float_bytes(1.0f);  // also the int32 1065353216
  pjrt::BufferPtr f32 = constants.get(bytes, PJRT_Buffer_Type_F32, {}, 0);
  pjrt::BufferPtr s32 = constants.get(bytes, PJRT_Buffer_Type_S32, {}, 0);
  pjrt::BufferPtr vector = constants.get(bytes, PJRT_Buffer_Type_F32, {1}, 0);
  EXPECT_NE(f32, s32);
  EXPECT_NE(f32, vector);
  EXPECT_EQ(s32->element_type(), PJRT_Buffer_Type_S32);
  EXPECT_EQ(vector->dims(), std::vector<int64_t>{1});
}

TEST(ConstantBuffers, LargeValuesAreUploadedEachTimeAndTheTableIsBounded) {
  ConstantBuffers constants(shared_client());
  std::vector<unsigned char> large(4 * sizeof(float), 0);
  pjrt::BufferPtr first = constants.get(large, PJRT_Buffer_Type_F32, {4}, 0);
  pjrt::BufferPtr second = constants.get(large, PJRT_Buffer_Type_F32, {4}, 0);
  EXPECT_EQ(first, second);  // 16 bytes: still small
  large.resize(5 * sizeof(float));
  EXPECT_NE(constants.get(large, PJRT_Buffer_Type_F32, {5}, 0),
            constants.get(large, PJRT_Buffer_Type_F32, {5}, 0));
  for (int i = 0; i < 2000; ++i) {
    constants.get(float_bytes(static_cast<float>(i)), PJRT_Buffer_Type_F32, {}, 0);
  }
  EXPECT_LE(constants.size(), 512u);
  EXPECT_EQ(read_float(constants.get(float_bytes(1999.0f), PJRT_Buffer_Type_F32, {}, 0)), 1999.0f);
}

}  // namespace
}  // namespace tpu::runtime
