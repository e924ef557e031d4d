// Copies between host and device that return before the data has moved (non_blocking=True
// with pinned memory): an upload keeps its host memory until the plugin is done with it
// and lets go of it on our thread, a download is waited for by synchronize() and by a
// marker recorded after it, and a copy touching host bytes another copy still uses waits
// for that one.
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

// Host memory whose release records the thread that released it.
std::shared_ptr<std::vector<float>> watched_memory(size_t n, std::thread::id* released_on) {
  return std::shared_ptr<std::vector<float>>(new std::vector<float>(counting(n)),
                                             [released_on](std::vector<float>* memory) {
                                               *released_on = std::this_thread::get_id();
                                               delete memory;
                                             });
}

TEST(HostTransfers, AnUploadHoldsItsMemoryAndLetsGoOfItOnOurThread) {
  Runtime& runtime = Runtime::initialize(tpu::testing::plugin_path());
  HostTransfers& transfers = runtime.host_transfers();
  std::thread::id released_on;
  auto host = watched_memory(1 << 16, &released_on);
  const float* data = host->data();
  const size_t bytes = host->size() * sizeof(float);
  std::weak_ptr<std::vector<float>> watched = host;
  pjrt::BufferPtr buffer = runtime.client().buffer_from_host_async(
      data, PJRT_Buffer_Type_F32, {1 << 16}, 0, transfers.add_upload(data, bytes, host));
  host.reset();                                 // the upload's hold keeps the memory
  transfers.wait_for_overlapping(data, bytes);  // returns once the plugin is done reading
  std::vector<float> back(1 << 16);
  buffer->to_host(back.data(), back.size() * sizeof(float));
  EXPECT_EQ(back, counting(1 << 16));
  transfers.wait_for_downloads();  // lets go of what callbacks handed over
  EXPECT_TRUE(watched.expired());
  EXPECT_EQ(released_on, std::this_thread::get_id());
}

TEST(HostTransfers, SynchronizeAndLaterMarkersWaitForDownloads) {
  Runtime& runtime = Runtime::initialize(tpu::testing::plugin_path());
  std::vector<float> values = counting(1 << 18);
  const std::vector<int64_t> dims{static_cast<int64_t>(values.size())};
  pjrt::BufferPtr buffer =
      runtime.client().buffer_from_host(values.data(), PJRT_Buffer_Type_F32, dims, 0);

  // Held until the copy lands: the destination.
  auto destination = std::make_shared<std::vector<float>>(values.size(), -1.0f);
  std::weak_ptr<std::vector<float>> watched = destination;
  const size_t bytes = values.size() * sizeof(float);
  std::shared_ptr<const pjrt::Event> landed = buffer->to_host_async(destination->data(), bytes);
  runtime.host_transfers().add_download(landed, destination->data(), bytes, destination);
  std::vector<float>* seen = destination.get();
  destination.reset();
  ASSERT_FALSE(watched.expired());

  Marker marker(runtime.pending(), runtime.host_transfers().pending_downloads());
  ASSERT_EQ(runtime.host_transfers().pending_downloads().size(), 1u);
  marker.wait();
  EXPECT_TRUE(marker.query());
  EXPECT_TRUE(landed->is_ready());
  EXPECT_EQ(*seen, values);

  runtime.synchronize();  // waits, then lets go of what it held
  EXPECT_TRUE(runtime.host_transfers().pending_downloads().empty());
  EXPECT_TRUE(runtime.host_transfers().downloads_landed());
  EXPECT_TRUE(watched.expired());
}

TEST(HostTransfers, ACopyOfBytesADownloadStillWritesWaitsForIt) {
  Runtime& runtime = Runtime::initialize(tpu::testing::plugin_path());
  std::vector<float> values = counting(1 << 20);
  const size_t bytes = values.size() * sizeof(float);
  pjrt::BufferPtr buffer = runtime.client().buffer_from_host(
      values.data(), PJRT_Buffer_Type_F32, {static_cast<int64_t>(values.size())}, 0);
  auto staging = std::make_shared<std::vector<float>>(values.size(), -1.0f);
  std::shared_ptr<const pjrt::Event> landed = buffer->to_host_async(staging->data(), bytes);
  runtime.host_transfers().add_download(landed, staging->data(), bytes, staging);
  // Bytes elsewhere do not wait; the staging buffer's last float does.
  float elsewhere = 0;
  runtime.host_transfers().wait_for_overlapping(&elsewhere, sizeof elsewhere);
  runtime.host_transfers().wait_for_overlapping(staging->data() + values.size() - 1, 4);
  EXPECT_TRUE(landed->is_ready());
  EXPECT_EQ(*staging, values);
  runtime.synchronize();
}

}  // namespace
}  // namespace tpu::runtime
