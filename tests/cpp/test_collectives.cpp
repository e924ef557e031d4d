// XLA collectives compiled for several replicas and launched from one thread per
// device, as the xla collective engine does it for one thread per rank.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
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
      [](int r) { return std::vector<float>{10.0f * (3 - r), 10.0f * (3 - r) + 1}; }, 8);
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

// A send and its receive as the xla engine runs them: one program over the two devices
// (replica 0 the sender, replica 1 the receiver), launched by each side with the same
// launch id. A ring of such pairs, every device sending and receiving at once from
// threads of its own, must not block one pair behind another.
TEST_F(Collectives, PairwisePermutesOfARingRunConcurrently) {
  Builder b;
  Value x = b.parameter({ElementType::U8, {6}});
  const std::string text = b.module_text({collective_permute(b, x, {{0, 1}})});
  std::vector<std::unique_ptr<pjrt::Executable>> edges;  // edge d: device d to d + 1
  for (int64_t d = 0; d < kReplicas; ++d) {
    edges.push_back(
        shared_client().compile(text, pjrt::replicated_compile_options({d, (d + 1) % kReplicas})));
  }
  std::vector<std::vector<uint8_t>> received(kReplicas, std::vector<uint8_t>(6));
  std::vector<std::thread> threads;
  for (int d = 0; d < kReplicas; ++d) {
    // Receivers start first: a send must not need its receiver to be launched before it.
    for (bool sending : {false, true}) {
      threads.emplace_back([&, d, sending] {
        const int edge = sending ? d : (d + kReplicas - 1) % kReplicas;
        std::vector<uint8_t> values(6, static_cast<uint8_t>(sending ? 10 * d + 1 : 0));
        BufferPtr in = shared_client().buffer_from_host(values.data(), PJRT_Buffer_Type_U8, {6}, d);
        auto out = edges[edge]->execute({in->get()}, shared_client().device(d),
                                        /*launch_id=*/(1 << 30) + edge);
        if (!sending) out[0]->to_host(received[d].data(), 6);
      });
    }
  }
  for (std::thread& t : threads) t.join();
  for (int d = 0; d < kReplicas; ++d) {
    const int from = (d + kReplicas - 1) % kReplicas;
    EXPECT_EQ(received[d], std::vector<uint8_t>(6, static_cast<uint8_t>(10 * from + 1)))
        << "device " << d;
  }
}

// Successive messages between one pair run the same program: the launch id alone says
// which receive each send meets, whatever order the receiver launches them in.
TEST_F(Collectives, PairwisePermutesMatchByLaunchId) {
  Builder b;
  Value x = b.parameter({ElementType::U8, {4}});
  auto executable = shared_client().compile(b.module_text({collective_permute(b, x, {{0, 1}})}),
                                            pjrt::replicated_compile_options({2, 1}));
  constexpr int kMessages = 3;
  std::vector<std::vector<uint8_t>> received(kMessages, std::vector<uint8_t>(4));
  std::vector<std::thread> threads;
  for (int m = kMessages - 1; m >= 0; --m) {  // receives launched last message first
    threads.emplace_back([&, m] {
      std::vector<uint8_t> zeros(4, 0);
      BufferPtr in = shared_client().buffer_from_host(zeros.data(), PJRT_Buffer_Type_U8, {4}, 1);
      auto out = executable->execute({in->get()}, shared_client().device(1), 100 + m);
      out[0]->to_host(received[m].data(), 4);
    });
  }
  threads.emplace_back([&] {
    for (int m = 0; m < kMessages; ++m) {  // sends in order, each waiting for its receive
      std::vector<uint8_t> values(4, static_cast<uint8_t>(m + 1));
      BufferPtr in = shared_client().buffer_from_host(values.data(), PJRT_Buffer_Type_U8, {4}, 2);
      executable->execute({in->get()}, shared_client().device(2), 100 + m);
    }
  });
  for (std::thread& t : threads) t.join();
  for (int m = 0; m < kMessages; ++m) {
    EXPECT_EQ(received[m], std::vector<uint8_t>(4, static_cast<uint8_t>(m + 1))) << "message " << m;
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
