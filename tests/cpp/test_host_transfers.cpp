// Copies between host and device that return before the data has moved (non_blocking=True
// with pinned memory): an upload keeps its host memory until the plugin says it is done
// with it, and a download tracked by the runtime is waited for by synchronize() and by a
// marker recorded after it.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

#include "plugin_path.h"
#include "runtime/marker.h"
#include "runtime/runtime.h"

namespace tpu::runtime {
namespace {

std::vector<float> counting(size_t n) {
  std::vector<float> values(n);
  std::iota(values.begin(), values.end(), 0.0f);
  return values;
}

TEST(HostTransfers, AnAsynchronousUploadKeepsItsHostMemoryUntilThePluginIsDone) {
  Runtime& runtime = Runtime::initialize(tpu::testing::plugin_path());
  auto host = std::make_shared<std::vector<float>>(counting(1 << 16));
  std::atomic<bool> done{false};
  pjrt::BufferPtr buffer = runtime.client().buffer_from_host_async(
      host->data(), PJRT_Buffer_Type_F32, {static_cast<int64_t>(host->size())}, 0,
      [host, &done]() mutable {
        host.reset();
        done = true;
      });
  std::weak_ptr<std::vector<float>> watched = host;
  host.reset();  // the callback's copy keeps the memory
  std::vector<float> back(1 << 16);
  buffer->to_host(back.data(), back.size() * sizeof(float));
  EXPECT_EQ(back, counting(1 << 16));
  runtime.synchronize();
  for (int i = 0; i < 1000 && !done; ++i) std::this_thread::yield();
  EXPECT_TRUE(done.load());
  EXPECT_TRUE(watched.expired());
}

TEST(HostTransfers, SynchronizeAndLaterMarkersWaitForTrackedDownloads) {
  Runtime& runtime = Runtime::initialize(tpu::testing::plugin_path());
  std::vector<float> values = counting(1 << 18);
  const std::vector<int64_t> dims{static_cast<int64_t>(values.size())};
  pjrt::BufferPtr buffer =
      runtime.client().buffer_from_host(values.data(), PJRT_Buffer_Type_F32, dims, 0);

  // Held by the runtime until the copy lands: the source buffer and the destination.
  auto destination = std::make_shared<std::vector<float>>(values.size(), -1.0f);
  std::weak_ptr<std::vector<float>> watched = destination;
  std::shared_ptr<const pjrt::Event> landed =
      buffer->to_host_async(destination->data(), values.size() * sizeof(float));
  runtime.track_host_transfer(
      landed,
      std::make_shared<std::pair<pjrt::BufferPtr, decltype(destination)>>(buffer, destination));
  std::vector<float>* seen = destination.get();
  destination.reset();
  ASSERT_FALSE(watched.expired());

  Marker marker(runtime.pending(), runtime.pending_host_transfers());
  ASSERT_EQ(runtime.pending_host_transfers().size(), 1u);
  marker.wait();
  EXPECT_TRUE(marker.query());
  EXPECT_TRUE(landed->is_ready());
  EXPECT_EQ(*seen, values);

  runtime.synchronize();  // waits, then lets go of what it held
  EXPECT_TRUE(runtime.pending_host_transfers().empty());
  EXPECT_TRUE(watched.expired());
}

}  // namespace
}  // namespace tpu::runtime
