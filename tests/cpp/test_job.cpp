// The key-value store a multi-process client is created with: the PJRT callbacks over it
// (called as a plugin calls them), the CPU plugin accepting it, and the start-up check
// that every process of a job loaded the same platform.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "pjrt/client.h"
#include "pjrt/error.h"
#include "pjrt/key_value_store.h"
#include "plugin_path.h"
#include "runtime/job.h"

namespace tpu {
namespace {

// One store shared by the "processes" (threads) of a test.
class MemoryStore final : public pjrt::KeyValueStore {
 public:
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; })) {
      throw pjrt::KeyValueTimeout("waited " + std::to_string(timeout.count()) + " ms");
    }
    return values_.at(key);
  }
  std::optional<std::string> try_get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(key);
    if (it == values_.end()) return std::nullopt;
    return it->second;
  }
  void set(const std::string& key, const std::string& value) override {
    if (key == "broken") throw std::runtime_error("store connection lost");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      values_[key] = value;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

// What a plugin's callback_error saw; the returned PJRT_Error is only a token here.
struct ReportedError {
  PJRT_Error_Code code = PJRT_Error_Code_OK;
  std::string message;
};
thread_local ReportedError reported;
PJRT_Error* record_error(PJRT_Error_Code code, const char* message, size_t size) {
  reported = {code, std::string(message, size)};
  return reinterpret_cast<PJRT_Error*>(&reported);
}
PJRT_CallbackError callback_error = &record_error;

PJRT_Error* put(MemoryStore& store, const std::string& key, const std::string& value) {
  auto args = PJRT_ARGS(PJRT_KeyValuePutCallback_Args);
  args.key = key.data();
  args.key_size = key.size();
  args.value = value.data();
  args.value_size = value.size();
  args.callback_error = &callback_error;
  args.user_arg = &store;
  return pjrt::key_value_callbacks().put(&args);
}

// The arguments a plugin passes to kv_get for `key` (a literal: it must outlive them).
PJRT_KeyValueGetCallback_Args get_args(MemoryStore& store, std::string_view key, int timeout_ms) {
  auto args = PJRT_ARGS(PJRT_KeyValueGetCallback_Args);
  args.key = key.data();
  args.key_size = key.size();
  args.timeout_in_ms = timeout_ms;
  args.callback_error = &callback_error;
  args.user_arg = &store;
  return args;
}

TEST(KeyValueCallbacks, PutThenGetReturnsTheBytesWithADeleter) {
  MemoryStore store;
  const std::string value("topology\0with a zero byte", 25);
  ASSERT_EQ(put(store, "gpu/topology", value), nullptr);

  auto args = get_args(store, "gpu/topology", 1000);
  ASSERT_EQ(pjrt::key_value_callbacks().get(&args), nullptr);
  EXPECT_EQ(std::string(args.value, args.value_size), value);
  ASSERT_NE(args.value_deleter_callback, nullptr);
  args.value_deleter_callback(args.value);  // the plugin frees the copy it was given
}

TEST(KeyValueCallbacks, GetWaitsForAnotherProcessAndTimesOutAsDeadlineExceeded) {
  MemoryStore store;
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    put(store, "nccl_id", "42");
  });
  auto args = get_args(store, "nccl_id", 5000);
  ASSERT_EQ(pjrt::key_value_callbacks().get(&args), nullptr);
  EXPECT_EQ(std::string(args.value, args.value_size), "42");
  args.value_deleter_callback(args.value);
  other.join();

  args = get_args(store, "never_set", 20);
  EXPECT_NE(pjrt::key_value_callbacks().get(&args), nullptr);
  EXPECT_EQ(reported.code, PJRT_Error_Code_DEADLINE_EXCEEDED);
  EXPECT_NE(reported.message.find("never_set"), std::string::npos) << reported.message;
}

TEST(KeyValueCallbacks, TryGetReportsAMissingKeyAsNotFound) {
  MemoryStore store;
  auto args = PJRT_ARGS(PJRT_KeyValueTryGetCallback_Args);
  args.key = "k";
  args.key_size = 1;
  args.callback_error = &callback_error;
  args.user_arg = &store;
  EXPECT_NE(pjrt::key_value_callbacks().try_get(&args), nullptr);
  EXPECT_EQ(reported.code, PJRT_Error_Code_NOT_FOUND);

  put(store, "k", "v");
  ASSERT_EQ(pjrt::key_value_callbacks().try_get(&args), nullptr);
  EXPECT_EQ(std::string(args.value, args.value_size), "v");
  args.value_deleter_callback(args.value);
}

TEST(KeyValueCallbacks, AStoreFailureBecomesAnErrorNotAnException) {
  MemoryStore store;
  EXPECT_NE(put(store, "broken", "v"), nullptr);
  EXPECT_EQ(reported.code, PJRT_Error_Code_INTERNAL);
  EXPECT_NE(reported.message.find("store connection lost"), std::string::npos);
}

TEST(KeyValueCallbacks, TheCpuPluginCreatesAClientWithTheStoreAndNodeOptions) {
  auto store = std::make_shared<MemoryStore>();
  pjrt::Client client(
      pjrt::Plugin::load(testing::plugin_path()),
      {{"cpu_device_count", int64_t{2}}, {"node_id", int64_t{1}}, {"num_nodes", int64_t{2}}},
      store);
  EXPECT_EQ(client.device_count(), 2);
}

runtime::JobProcess job_of(int node, int nodes, std::shared_ptr<MemoryStore> store) {
  runtime::JobProcess job;
  job.node_id = node;
  job.num_nodes = nodes;
  job.key_values = std::move(store);
  job.timeout = std::chrono::milliseconds(2000);
  return job;
}

TEST(JobStartup, ProcessesOfTheSamePlatformAgree) {
  auto store = std::make_shared<MemoryStore>();
  std::thread other([&] { runtime::check_same_platform(job_of(1, 2, store), "cpu 0.1"); });
  EXPECT_NO_THROW(runtime::check_same_platform(job_of(0, 2, store), "cpu 0.1"));
  other.join();
}

TEST(JobStartup, APlatformMismatchNamesBothProcesses) {
  auto store = std::make_shared<MemoryStore>();
  store->set("torch_tpu/platform/0", "tpu 0.0.30");
  try {
    runtime::check_same_platform(job_of(1, 2, store), "cuda 0.4");
    FAIL() << "expected a mismatch";
  } catch (const std::runtime_error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("process 0 runs 'tpu 0.0.30'"), std::string::npos) << message;
    EXPECT_NE(message.find("process 1 runs 'cuda 0.4'"), std::string::npos) << message;
  }
}

TEST(JobStartup, AMissingProcessIsNamedAfterTheTimeout) {
  auto store = std::make_shared<MemoryStore>();
  runtime::JobProcess job = job_of(0, 3, store);
  job.timeout = std::chrono::milliseconds(30);
  store->set("torch_tpu/platform/1", "cpu 0.1");
  try {
    runtime::check_same_platform(job, "cpu 0.1");
    FAIL() << "expected a timeout";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("process 2 of 3 did not create its PJRT client"),
              std::string::npos)
        << e.what();
  }
}

TEST(JobStartup, ASingleProcessNeedsNoStore) {
  EXPECT_NO_THROW(runtime::check_same_platform(runtime::JobProcess{}, "cpu"));
}

}  // namespace
}  // namespace tpu
