// DeferredGraph's recording of a flush and its replay on new operands (what
// torch.compile's graph replay, csrc/aten/graph_replay.cpp, builds on), and its early cut
// after a host wait.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "hlo/builder.h"
#include "plugin_path.h"
#include "runtime/buffer_type.h"
#include "runtime/deferred_graph.h"
#include "runtime/device_buffer.h"
#include "runtime/memory.h"
#include "runtime/runtime.h"

namespace tpu::runtime {
namespace {

std::vector<float> read(const pjrt::BufferPtr& buffer, size_t n) {
  std::vector<float> out(n);
  buffer->to_host(out.data(), n * sizeof(float));
  return out;
}

std::vector<unsigned char> bytes_of(float value) {
  std::vector<unsigned char> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

TEST(DeferredGraph, RecordsAFlushAndReplaysItOnNewOperands) {
  Runtime& runtime = Runtime::initialize(tpu::testing::plugin_path());
  const hlo::TensorType vector{hlo::ElementType::F32, {3}};
  const hlo::TensorType scalar{hlo::ElementType::F32, {}};
  // @op(x, s, key) = -x + s, and the key's offset word as a float (to see new keys);
  // results are 1-D, as a storage's contents are.
  hlo::Builder b;
  hlo::Value x = b.parameter(vector);
  hlo::Value s = b.parameter(scalar);
  hlo::Value key = b.parameter(hlo::TensorType{hlo::ElementType::U64, {2}});
  hlo::Value y = b.binary("add", b.unary("negate", x), b.broadcast_to(s, {3}));
  hlo::Value k = b.convert(b.slice(key, {1}, {2}, {1}), hlo::ElementType::F32);
  std::string function = b.function_text("private @op", {y, k});

  memory().reserve(0, 3 * 4 + 3 * 4 + 4);
  DeviceStorage input(0, 12), output(0, 12), drawn(0, 4);
  float data[3] = {1, 2, 3};
  const pjrt::Client& client = runtime.client();
  input.set_buffer(client.buffer_from_host(data, PJRT_Buffer_Type_F32, {3}, 0),
                   hlo::ElementType::F32);
  std::vector<unsigned char> key_bytes(16, 0);
  key_bytes[8] = 5;  // offset 5

  DeferredGraph& graph = runtime.deferred_graph(0);
  auto recording = std::make_shared<DeferredGraph::Recording>();
  graph.record_next_flush(recording);
  graph.record(function,
               {{&input, {}, vector},
                {nullptr, bytes_of(10), scalar},
                {nullptr, key_bytes, hlo::TensorType{hlo::ElementType::U64, {2}}, true}},
               {{&output, vector}, {&drawn, hlo::TensorType{hlo::ElementType::F32, {1}}}});
  graph.flush();
  EXPECT_EQ(read(output.buffer(), 3), (std::vector<float>{9, 8, 7}));
  EXPECT_EQ(read(drawn.buffer(), 1), (std::vector<float>{5}));

  ASSERT_TRUE(recording->complete);
  ASSERT_EQ(recording->parameters.size(), 1u);
  EXPECT_EQ(recording->parameters[0], input.buffer()->get());
  EXPECT_EQ(recording->outputs, (std::vector<DeviceStorage*>{&output, &drawn}));
  ASSERT_EQ(recording->random_keys.size(), 1u);
  EXPECT_EQ(graph.pending_ops(), 0);

  // Replay: a new input buffer and a new key; the scalar operand is kept.
  float other[3] = {-1, 0, 4};
  auto host = recording->host_groups;
  const auto& [group, offset] = recording->random_keys[0];
  EXPECT_EQ(host[group].first, hlo::ElementType::U64);
  host[group].second[offset + 8] = 42;
  std::vector<pjrt::BufferPtr> outputs = graph.replay(
      *recording, {client.buffer_from_host(other, PJRT_Buffer_Type_F32, {3}, 0)}, host);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(read(outputs[0], 3), (std::vector<float>{11, 10, 6}));
  EXPECT_EQ(read(outputs[1], 1), (std::vector<float>{42}));
}

// Records y = x + 1 into `graph` from the calling thread; returns the pending op count.
int64_t record_increment(DeferredGraph& graph, DeviceStorage& x, DeviceStorage& y) {
  const hlo::TensorType vector{hlo::ElementType::F32, {3}};
  hlo::Builder b;
  hlo::Value in = b.parameter(vector);
  hlo::Value one = b.broadcast_to(b.constant(1.0, hlo::ElementType::F32), {3});
  return graph.record(b.function_text("private @op", {b.binary("add", in, one)}),
                      {{&x, {}, vector}}, {{&y, vector}});
}

// Records from another thread, as the autograd engine's device thread does at backward().
int64_t record_increment_elsewhere(DeferredGraph& graph, DeviceStorage& x, DeviceStorage& y) {
  int64_t pending = 0;
  std::thread other([&] { pending = record_increment(graph, x, y); });
  other.join();
  return pending;
}

TEST(DeferredGraph, RunsThePendingOpsWhenAnotherThreadRecordsAfterTheRecorderWaited) {
  Runtime& runtime = Runtime::initialize(tpu::testing::plugin_path());
  DeferredGraph& graph = runtime.deferred_graph(0);
  graph.flush();
  memory().reserve(0, 4 * 12);
  DeviceStorage a(0, 12), b(0, 12), c(0, 12), d(0, 12);
  float data[3] = {1, 2, 3};
  a.set_buffer(runtime.client().buffer_from_host(data, PJRT_Buffer_Type_F32, {3}, 0),
               hlo::ElementType::F32);

  // Uses up a wait an earlier test left on this thread.
  record_increment(graph, a, b);
  record_increment_elsewhere(graph, b, c);
  graph.flush();

  // No wait: the other thread's op joins the pending graph.
  EXPECT_EQ(record_increment(graph, a, b), 1);
  EXPECT_EQ(record_increment_elsewhere(graph, b, c), 2);
  graph.flush();

  // The recorder waited: the other thread's first op runs what is pending first, once.
  DeferredGraph::note_host_wait();
  EXPECT_EQ(record_increment(graph, a, b), 1);
  EXPECT_EQ(record_increment(graph, b, c), 2);
  EXPECT_EQ(record_increment_elsewhere(graph, c, d), 1);
  EXPECT_EQ(c.pending_graph(), nullptr);
  EXPECT_EQ(record_increment(graph, d, b), 2);  // back on the recorder: no second cut
  graph.flush();
  EXPECT_EQ(read(b.buffer(), 3), (std::vector<float>{5, 6, 7}));

  // Another thread's wait does not mark this thread's graph.
  std::thread([] { DeferredGraph::note_host_wait(); }).join();
  EXPECT_EQ(record_increment(graph, a, b), 1);
  EXPECT_EQ(record_increment_elsewhere(graph, b, c), 2);
  graph.flush();
  EXPECT_EQ(read(c.buffer(), 3), (std::vector<float>{3, 4, 5}));
}

}  // namespace
}  // namespace tpu::runtime
