// XLA collectives compiled for several replicas and launched from one thread per
// device, as the xla collective engine does it for one thread per rank.
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "hlo/builder.h"
#include "hlo/collectives.h"
#include "pjrt/client.h"
#include "plugin_path.h"

namespace tpu::hlo {
namespace {

using pjrt::BufferPtr;
using tpu::testing::shared_client;

constexpr int kReplicas = 4;

// Runs a one-input program on every device of `devices` at once (replica r on
// devices[r], input from `input(r)`), returning each replica's output.
std::vector<std::vector<float>> run_replicated(const std::string& program,
                                               const std::vector<int64_t>& devices,
                                               const std::vector<int64_t>& dims,
                                               const std::function<std::vector<float>(int)>& input,
                                               size_t output_size) {
  std::unique_ptr<pjrt::Executable> executable;
  try {
    executable = shared_client().compile(program, pjrt::replicated_compile_options(devices));
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what() << "\n" << program;
    return {};
  }
  std::vector<std::vector<float>> outputs(devices.size(), std::vector<float>(output_size));
  std::vector<std::thread> threads;
  for (size_t r = 0; r < devices.size(); ++r) {
    threads.emplace_back([&, r] {
      const int device = static_cast<int>(devices[r]);
      std::vector<float> values = input(static_cast<int>(r));
      BufferPtr in =
          shared_client().buffer_from_host(values.data(), PJRT_Buffer_Type_F32, dims, device);
      auto out = executable->execute({in->get()}, shared_client().device(device), /*launch_id=*/7);
      out[0]->to_host(outputs[r].data(), output_size * sizeof(float));
    });
  }
  for (std::thread& t : threads) t.join();
  return outputs;
}

class Collectives : public ::testing::Test {
 protected:
  void SetUp() override {
    if (shared_client().device_count() < kReplicas) GTEST_SKIP() << "needs 4 devices";
  }
};

TEST_F(Collectives, AllGatherFollowsTheDeviceAssignment) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {1, 2}});
  std::string text = b.module_text({all_gather(b, x, 0, kReplicas, 1)});
  // Replica r runs on device 3 - r; device d contributes {10d, 10d + 1}.
  auto outputs = run_replicated(
      text, {3, 2, 1, 0}, {1, 2},
      [](int r) {
        return std::vector<float>{10.0f * (3 - r), 10.0f * (3 - r) + 1};
      },
      8);
  const std::vector<float> expected{30, 31, 20, 21, 10, 11, 0, 1};
  for (const auto& out : outputs) EXPECT_EQ(out, expected);
}

// Replica r holds {4r, 4r + 1, 4r + 2, 4r + 3}.
std::vector<float> replica_values(int r) {
  return {4.0f * r, 4.0f * r + 1, 4.0f * r + 2, 4.0f * r + 3};
}

TEST_F(Collectives, ReduceScatter) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {kReplicas, 1}});
  auto outputs = run_replicated(b.module_text({reduce_scatter(b, x, "add", 0, kReplicas, 1)}),
                                {0, 1, 2, 3}, {kReplicas, 1}, replica_values, 1);
  for (int r = 0; r < kReplicas; ++r) {
    EXPECT_EQ(outputs[r], std::vector<float>{24.0f + 4 * r}) << "replica " << r;  // sum of 4q + r
  }
}

TEST_F(Collectives, AllToAll) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {kReplicas, 1}});
  auto outputs = run_replicated(b.module_text({all_to_all(b, x, 0, kReplicas)}), {0, 1, 2, 3},
                                {kReplicas, 1}, replica_values, kReplicas);
  for (int r = 0; r < kReplicas; ++r) {
    std::vector<float> expected;
    for (int q = 0; q < kReplicas; ++q) expected.push_back(4.0f * q + r);
    EXPECT_EQ(outputs[r], expected) << "replica " << r;
  }
}

TEST_F(Collectives, CollectivePermuteRing) {
  Builder b;
  Value x = b.parameter({ElementType::F32, {kReplicas, 1}});
  Value shifted = collective_permute(b, x, {{0, 1}, {1, 2}, {2, 3}, {3, 0}});
  auto outputs = run_replicated(b.module_text({shifted}), {0, 1, 2, 3}, {kReplicas, 1},
                                replica_values, kReplicas);
  for (int r = 0; r < kReplicas; ++r) {
    EXPECT_EQ(outputs[r], replica_values((r + kReplicas - 1) % kReplicas)) << "replica " << r;
  }
}

TEST(CompileOptions, ReplicatedOptionsNameEveryDevice) {
  const std::string options = pjrt::replicated_compile_options({2, 3});
  // executable_build_options { num_replicas: 2 num_partitions: 1 device_assignment {
  //   replica_count: 2 computation_count: 1 computation_devices { replica_device_ids: [2, 3] } } }
  EXPECT_EQ(options, std::string("\x1a\x10\x20\x02\x28\x01\x4a\x0a\x08\x02\x10\x01\x1a\x04"
                                 "\x0a\x02\x02\x03",
                                 18));
}

}  // namespace
}  // namespace tpu::hlo
