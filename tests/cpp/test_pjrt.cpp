#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "pjrt/client.h"
#include "pjrt/element_type.h"
#include "pjrt/error.h"
#include "plugin_path.h"

namespace tpu::pjrt {
namespace {

using tpu::testing::shared_client;

const char* kAddAndSum = R"(
module @m {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %c = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %1 = "stablehlo.reduce"(%0, %c) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    "func.return"(%0, %1) : (tensor<4xf32>, tensor<f32>) -> ()
  }
}
)";

// kAddAndSum run on device 0 with both operands `a`: the sum of a + a.
float sum_of_a_plus_a(Executable& executable, std::array<float, 4> a) {
  BufferPtr ba = shared_client().buffer_from_host(a.data(), PJRT_Buffer_Type_F32, {4}, 0);
  std::vector<BufferPtr> outputs =
      executable.execute({ba->get(), ba->get()}, shared_client().device(0));
  float total = 0;
  outputs[1]->to_host(&total, sizeof total);
  return total;
}

TEST(Plugin, LoadsAndReportsVersion) {
  const Plugin& plugin = shared_client().plugin();
  EXPECT_EQ(plugin.api_major(), 0);
  EXPECT_GE(plugin.api_minor(), 40);
  EXPECT_FALSE(shared_client().platform_name().empty());
  EXPECT_GE(shared_client().device_count(), 1);
}

TEST(Plugin, MissingFileIsAClearError) {
  try {
    Plugin::load("/nonexistent/plugin.so");
    FAIL() << "expected an exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/plugin.so"), std::string::npos);
  }
}

TEST(Plugin, LibraryWithoutGetPjrtApiIsRejected) {
  EXPECT_THROW(Plugin::load("libm.so.6"), std::runtime_error);
}

TEST(Client, DeviceInfo) {
  DeviceInfo info = shared_client().device_info(0);
  EXPECT_FALSE(info.kind.empty());
  EXPECT_THROW(shared_client().device_info(shared_client().device_count()), std::out_of_range);
}

TEST(Buffer, RoundTripsEverySupportedType) {
  const PJRT_Buffer_Type types[] = {
      PJRT_Buffer_Type_PRED, PJRT_Buffer_Type_S8,  PJRT_Buffer_Type_S16, PJRT_Buffer_Type_S32,
      PJRT_Buffer_Type_S64,  PJRT_Buffer_Type_U8,  PJRT_Buffer_Type_F16, PJRT_Buffer_Type_BF16,
      PJRT_Buffer_Type_F32,  PJRT_Buffer_Type_F64, PJRT_Buffer_Type_C64};
  for (PJRT_Buffer_Type type : types) {
    size_t bytes = 6 * element_size(type);
    std::vector<unsigned char> host(bytes);
    for (size_t i = 0; i < bytes; ++i) host[i] = static_cast<unsigned char>(i % 2);  // valid bools
    BufferPtr buffer = shared_client().buffer_from_host(host.data(), type, {2, 3}, 0);
    EXPECT_EQ(buffer->element_type(), type);
    EXPECT_EQ(buffer->dims(), (std::vector<int64_t>{2, 3}));
    std::vector<unsigned char> back(bytes, 0xff);
    buffer->to_host(back.data(), back.size());
    EXPECT_EQ(back, host) << "type " << type;
  }
}

TEST(Buffer, InvalidElementTypeNeverReachesThePlugin) {
  float x = 1;
  EXPECT_THROW(shared_client().buffer_from_host(&x, PJRT_Buffer_Type_INVALID, {}, 0),
               std::invalid_argument);
  EXPECT_THROW(shared_client().buffer_from_host(&x, static_cast<PJRT_Buffer_Type>(999), {}, 0),
               std::invalid_argument);
}

TEST(Buffer, CpuPluginPointerIsTheHostContents) {
  float a[4] = {1, 2, 3, 4};
  BufferPtr buffer = shared_client().buffer_from_host(a, PJRT_Buffer_Type_F32, {4}, 0);
  buffer->ready_event()->await();
  const auto* contents = reinterpret_cast<const float*>(buffer->unsafe_pointer());
  EXPECT_EQ(std::vector<float>(contents, contents + 4), std::vector<float>(a, a + 4));
}

TEST(Buffer, AliasingHostReleasesTheMemoryOnlyWhenDone) {
  auto host = std::make_shared<std::vector<float>>(std::vector<float>{5, 6, 7, 8});
  std::atomic<int> released{0};
  {
    BufferPtr buffer = shared_client().buffer_aliasing_host(host->data(), PJRT_Buffer_Type_F32, {4},
                                                            0, [&released] { ++released; });
    std::vector<float> back(4, 0);
    buffer->to_host(back.data(), back.size() * sizeof(float));
    EXPECT_EQ(back, *host);
  }
  for (int i = 0; i < 1000 && released == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(released, 1);  // exactly once, after the buffer is gone
}

TEST(Executable, CompilesAndRuns) {
  auto executable = shared_client().compile(kAddAndSum);
  ASSERT_EQ(executable->num_outputs(), 2u);
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40};
  BufferPtr ba = shared_client().buffer_from_host(a, PJRT_Buffer_Type_F32, {4}, 0);
  BufferPtr bb = shared_client().buffer_from_host(b, PJRT_Buffer_Type_F32, {4}, 0);
  std::vector<BufferPtr> outputs =
      executable->execute({ba->get(), bb->get()}, shared_client().device(0));
  float sum_out[4];
  float total = 0;
  outputs[0]->to_host(sum_out, sizeof sum_out);
  outputs[1]->to_host(&total, sizeof total);
  EXPECT_EQ(sum_out[3], 44.0f);
  EXPECT_EQ(total, 110.0f);
  outputs[0]->ready_event()->await();
}

TEST(Executable, CompileErrorCarriesThePluginMessage) {
  try {
    shared_client().compile("this is not mlir");
    FAIL() << "expected an exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiling StableHLO failed"), std::string::npos);
    EXPECT_GT(std::string(e.what()).size(), 30u);
  }
}

TEST(Executable, SerializeAndDeserialize) {
  auto executable = shared_client().compile(kAddAndSum);
  std::string bytes = executable->serialize();
  ASSERT_FALSE(bytes.empty());
  auto loaded = shared_client().deserialize(bytes);
  EXPECT_EQ(sum_of_a_plus_a(*loaded, {1, 1, 1, 1}), 8.0f);
}

TEST(Executable, CorruptSerializedBytesThrow) {
  EXPECT_THROW(shared_client().deserialize("not an executable"), Error);
  EXPECT_THROW(shared_client().deserialize(""), std::invalid_argument);
}

TEST(Event, OnReadyCallbackFires) {
  float a[4] = {1, 2, 3, 4};
  BufferPtr ba = shared_client().buffer_from_host(a, PJRT_Buffer_Type_F32, {4}, 0);
  std::promise<std::string> fired;
  ba->ready_event()->on_ready([&](const std::string& error) { fired.set_value(error); });
  EXPECT_EQ(fired.get_future().get(), "");
}

TEST(CompileOptions, OneReplicaOnePartitionPortable) {
  EXPECT_EQ(portable_compile_options(), std::string("\x1a\x04\x20\x01\x28\x01\x20\x01", 8));
}

TEST(CompileOptions, AnOptionOverrideIsAMapEntryAppendedToTheOptions) {
  std::string base = portable_compile_options();
  // env_option_overrides (7) { key (1): "opt", value (2): { bool_field (2): false } }.
  EXPECT_EQ(with_option_override(base, "opt", false),
            base + std::string("\x3a\x09\x0a\x03opt\x12\x02\x10\x00", 11));
  // int_field (3) = 300, a two-byte varint.
  EXPECT_EQ(with_option_override(base, "opt", int64_t{300}),
            base + std::string("\x3a\x0a\x0a\x03opt\x12\x03\x18\xac\x02", 12));
}

TEST(CompileOptions, TheCpuPluginAppliesOverridesAndRejectsUnknownOnes) {
  if (shared_client().platform_name() != "cpu") GTEST_SKIP() << "XLA:CPU's option names";
  std::string options =
      with_option_override(portable_compile_options(), "xla_cpu_use_fusion_emitters", false);
  EXPECT_EQ(sum_of_a_plus_a(*shared_client().compile(kAddAndSum, options), {1, 2, 3, 4}), 20.0f);
  std::string unknown =
      with_option_override(portable_compile_options(), "xla_no_such_option", true);
  try {
    shared_client().compile(kAddAndSum, unknown);
    FAIL() << "an unknown option compiled";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("xla_no_such_option"), std::string::npos)
        << error.what();
  }
}

TEST(Executable, OneCompileRunsOnEveryDevice) {
  auto executable = shared_client().compile(kAddAndSum);
  for (int device = 0; device < shared_client().device_count(); ++device) {
    float a[4] = {1, 2, 3, static_cast<float>(device)};
    BufferPtr ba = shared_client().buffer_from_host(a, PJRT_Buffer_Type_F32, {4}, device);
    std::vector<BufferPtr> outputs =
        executable->execute({ba->get(), ba->get()}, shared_client().device(device));
    float total = 0;
    outputs[1]->to_host(&total, sizeof total);
    EXPECT_EQ(total, 12.0f + 2 * device) << "device " << device;
  }
}

}  // namespace
}  // namespace tpu::pjrt
