// How torch_tpu meets plugins other than the CPU plugin it is built against: other PJRT C
// API versions, tables with missing entries, another platform (through the stand-in plugin
// of fake_plugin.h), client creation failing half-way, create options of every type, and
// PJRT_NamedValue arrays written with a larger struct than ours.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "fake_plugin.h"
#include "hlo/builder.h"
#include "pjrt/client.h"
#include "pjrt/error.h"
#include "pjrt/named_value.h"
#include "plugin_path.h"
#include "runtime/program_cache.h"
#include "runtime/runtime.h"

namespace tpu::pjrt {
namespace {

// The stand-in plugin module; configure() applies to the next Plugin::load of it.
struct FakePlugin {
  static const char* path() { return TORCH_TPU_TEST_FAKE_PLUGIN; }
  static void* handle() {
    static void* handle = dlopen(path(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error(std::string("fake plugin: ") + dlerror());
    return handle;
  }
  static void configure(const TorchTpuFakePluginConfig& config) {
    auto* set = reinterpret_cast<TorchTpuFakePlugin_ConfigureFn*>(
        dlsym(handle(), "TorchTpuFakePlugin_Configure"));
    ASSERT_NE(set, nullptr);
    set(&config);
  }
  static TorchTpuFakePluginStats stats() {
    auto* get =
        reinterpret_cast<TorchTpuFakePlugin_StatsFn*>(dlsym(handle(), "TorchTpuFakePlugin_Stats"));
    return get();
  }
};

TorchTpuFakePluginConfig unchanged() {
  TorchTpuFakePluginConfig config{};
  config.minor = -1;
  return config;
}

// The offset just past the required entry that lies furthest into the table.
size_t end_of_required_entries() {
  size_t count = 0;
  const ApiEntry* entries = required_api_entries(&count);
  size_t end = 0;
  for (size_t i = 0; i < count; ++i) end = std::max(end, entries[i].offset + sizeof(void*));
  return end;
}

std::string message_of_load(const TorchTpuFakePluginConfig& config) {
  FakePlugin::configure(config);
  try {
    Plugin::load(FakePlugin::path());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// Compiles, uploads, runs x + x and reads it back on `client`.
void expect_a_round_trip(const Client& client) {
  hlo::Builder b;
  hlo::Value x = b.parameter(hlo::TensorType{hlo::ElementType::F32, {3}});
  auto executable = client.compile(b.module_text({b.binary("add", x, x)}));
  const float in[3] = {1, 2, 3};
  BufferPtr buffer = client.buffer_from_host(in, PJRT_Buffer_Type_F32, {3}, 0);
  std::vector<BufferPtr> outputs = executable->execute({buffer->get()}, client.device(0));
  float out[3] = {};
  outputs.at(0)->to_host(out, sizeof out);
  EXPECT_EQ(std::vector<float>(out, out + 3), (std::vector<float>{2, 4, 6}));
}

TEST(PluginVersion, AnotherMajorVersionIsRefusedNamingBothVersions) {
  const Plugin& real = tpu::testing::shared_client().plugin();
  TorchTpuFakePluginConfig config = unchanged();
  config.major_delta = 1;
  std::string message = message_of_load(config);
  const std::string theirs =
      std::to_string(real.api_major() + 1) + "." + std::to_string(real.api_minor());
  const std::string ours = std::to_string(PJRT_API_MAJOR) + "." + std::to_string(PJRT_API_MINOR);
  EXPECT_NE(message.find(theirs), std::string::npos) << message;
  EXPECT_NE(message.find(ours), std::string::npos) << message;
  EXPECT_NE(message.find(FakePlugin::path()), std::string::npos) << message;
}

TEST(PluginVersion, ANewerMinorVersionWithALargerTableLoadsAndRuns) {
  // What the CUDA plugin of jax 0.11.2 reports: API 0.115, a 1144-byte table.
  TorchTpuFakePluginConfig config = unchanged();
  config.minor = 115;
  config.table_size = 1144;
  ASSERT_GT(config.table_size, sizeof(PJRT_Api));
  FakePlugin::configure(config);
  auto plugin = Plugin::load(FakePlugin::path());
  EXPECT_EQ(plugin->api_minor(), 115);
  EXPECT_FALSE(plugin->attributes().empty());
  Client client(plugin);
  expect_a_round_trip(client);
}

TEST(PluginVersion, ANullRequiredEntryIsRefusedNamingIt) {
  TorchTpuFakePluginConfig config = unchanged();
  config.null_entries[0] = offsetof(PJRT_Api, PJRT_LoadedExecutable_Execute);
  config.null_entries[1] = offsetof(PJRT_Api, PJRT_Event_OnReady);
  std::string message = message_of_load(config);
  EXPECT_NE(message.find("lacks entries torch_tpu requires"), std::string::npos) << message;
  EXPECT_NE(message.find("PJRT_LoadedExecutable_Execute"), std::string::npos) << message;
  EXPECT_NE(message.find("PJRT_Event_OnReady"), std::string::npos) << message;
  EXPECT_EQ(message.find("PJRT_Client_Compile"), std::string::npos) << message;
}

TEST(PluginVersion, ATableEndingBeforeARequiredEntryIsRefused) {
  TorchTpuFakePluginConfig config = unchanged();
  config.table_size = end_of_required_entries() - 1;
  std::string message = message_of_load(config);
  EXPECT_NE(message.find("PJRT_Buffer_UnsafePointer"), std::string::npos) << message;
}

TEST(PluginVersion, OptionalEntriesMayBeMissing) {
  // The table ends right after the last required entry, and the optional ones that lie
  // inside it are null: the plugin loads and works without them.
  TorchTpuFakePluginConfig config = unchanged();
  config.table_size = end_of_required_entries();
  config.null_entries[0] = offsetof(PJRT_Api, PJRT_Plugin_Attributes);
  config.null_entries[1] = offsetof(PJRT_Api, PJRT_Device_MemoryStats);
  FakePlugin::configure(config);
  auto plugin = Plugin::load(FakePlugin::path());
  EXPECT_FALSE(PJRT_HAS(*plugin, PJRT_Plugin_Attributes));
  EXPECT_FALSE(PJRT_HAS(*plugin, PJRT_Buffer_IncreaseExternalReferenceCount));  // cut off
  EXPECT_TRUE(PJRT_HAS(*plugin, PJRT_Buffer_UnsafePointer));
  EXPECT_TRUE(plugin->attributes().empty());
  Client client(plugin);
  EXPECT_EQ(client.memory_limit(0), std::nullopt);
  expect_a_round_trip(client);
}

TEST(PluginPlatform, AnotherPlatformsBranchesRunOnTheStandIn) {
  TorchTpuFakePluginConfig config = unchanged();
  config.platform_name = "cuda";
  config.minor = 115;
  config.table_size = 1144;
  FakePlugin::configure(config);
  Client client(Plugin::load(FakePlugin::path()));
  EXPECT_EQ(client.platform_name(), "cuda");
  // No XLA:CPU option overrides outside the CPU platform.
  const std::string base = portable_compile_options();
  EXPECT_EQ(runtime::compile_options_for(client, runtime::ProgramKind::QuickOp, base), base);
  runtime::ProgramCache cache(client);
  EXPECT_FALSE(cache.tiered());
  hlo::Builder b;
  hlo::Value x = b.parameter(hlo::TensorType{hlo::ElementType::F32, {2}});
  auto executable =
      cache.get(b.module_text({b.unary("negate", x)}), "negate", runtime::ProgramKind::QuickOp);
  EXPECT_FALSE(executable->quick());
  expect_a_round_trip(client);
}

// The whole runtime on the "cuda" stand-in, in a process of its own (the runtime is one
// per process, and this binary's other tests initialize it on the CPU plugin).
TEST(PluginPlatform, RuntimeInitializesOnTheStandIn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        TorchTpuFakePluginConfig config = unchanged();
        config.platform_name = "cuda";
        config.minor = 115;
        config.table_size = 1144;
        FakePlugin::configure(config);
        runtime::Runtime& rt = runtime::Runtime::initialize(FakePlugin::path());
        bool ok = rt.client().platform_name() == "cuda" && rt.device_count() >= 1;
        hlo::Builder b;
        hlo::Value x = b.parameter(hlo::TensorType{hlo::ElementType::F32, {1}});
        auto executable = rt.programs().get(b.module_text({b.unary("negate", x)}));
        const float in = 5;
        BufferPtr input = rt.client().buffer_from_host(&in, PJRT_Buffer_Type_F32, {1}, 0);
        float out = 0;
        executable->execute({input->get()}, rt.client().device(0)).at(0)->to_host(&out, 4);
        std::exit(ok && out == -5.0f ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// A store that notes how many clients the stand-in had destroyed when the store died.
class RecordingStore : public KeyValueStore {
 public:
  explicit RecordingStore(int64_t* destroyed_at_death) : destroyed_at_death_(destroyed_at_death) {}
  ~RecordingStore() override { *destroyed_at_death_ = FakePlugin::stats().clients_destroyed; }
  std::string get(const std::string& key, std::chrono::milliseconds) override {
    throw KeyValueTimeout("no key " + key);
  }
  std::optional<std::string> try_get(const std::string&) override { return std::nullopt; }
  void set(const std::string&, const std::string&) override {}

 private:
  int64_t* destroyed_at_death_;
};

TEST(ClientCreation, AFailedQueryAfterCreateDestroysTheClientBeforeTheStore) {
  TorchTpuFakePluginConfig config = unchanged();
  config.fail_platform_version = true;
  FakePlugin::configure(config);
  auto plugin = Plugin::load(FakePlugin::path());
  const TorchTpuFakePluginStats before = FakePlugin::stats();
  int64_t destroyed_at_store_death = -1;
  try {
    Client client(plugin, {}, std::make_shared<RecordingStore>(&destroyed_at_store_death));
    FAIL() << "expected PJRT_Client_PlatformVersion to fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PJRT_Client_PlatformVersion"), std::string::npos);
  }
  const TorchTpuFakePluginStats after = FakePlugin::stats();
  EXPECT_EQ(after.clients_created, before.clients_created + 1);
  EXPECT_EQ(after.clients_destroyed, before.clients_destroyed + 1);  // not leaked
  EXPECT_EQ(destroyed_at_store_death, after.clients_destroyed);      // the store outlived it
}

TEST(ClientCreation, TheStoreOutlivesAClientThatIsDestroyed) {
  FakePlugin::configure(unchanged());
  int64_t destroyed_at_store_death = -1;
  int64_t destroyed_before = 0;
  {
    Client client(Plugin::load(FakePlugin::path()), {},
                  std::make_shared<RecordingStore>(&destroyed_at_store_death));
    destroyed_before = FakePlugin::stats().clients_destroyed;
  }
  EXPECT_EQ(destroyed_at_store_death, destroyed_before + 1);
}

TEST(ClientCreation, OptionsOfEveryTypeReachThePlugin) {
  FakePlugin::configure(unchanged());
  // The GPU plugin's options as JAX passes them, and one the CPU plugin acts on.
  const std::vector<CreateOption> options = {{"platform_name", std::string("cuda")},
                                             {"allocator", std::string("bfc")},
                                             {"memory_fraction", 0.5},
                                             {"preallocate", false},
                                             {"visible_devices", std::vector<int64_t>{0, 1}},
                                             {"cpu_device_count", int64_t{2}}};
  Client client(Plugin::load(FakePlugin::path()), options);
  const std::string seen = FakePlugin::stats().last_create_options;
  EXPECT_EQ(seen,
            "platform_name=string:cuda\n"
            "allocator=string:bfc\n"
            "memory_fraction=float:0.5\n"
            "preallocate=bool:false\n"
            "visible_devices=int64_list:0,1\n"
            "cpu_device_count=int64:2\n");
  EXPECT_EQ(client.device_count(), 2);  // the one the CPU plugin knows took effect
}

TEST(ClientCreation, TheCpuPluginIgnoresOptionsItDoesNotKnow) {
  // Observed on xla-cpu-pjrt 0.0.1: unknown names are ignored, whatever their type. (A
  // known name with another type makes it throw a C++ exception through the C API,
  // std::bad_variant_access, which is not tested here: it is undefined behaviour.)
  auto plugin = Plugin::load(tpu::testing::plugin_path());
  Client client(plugin, {{"no_such_option", std::string("x")},
                         {"another_one", true},
                         {"cpu_device_count", int64_t{3}}});
  EXPECT_EQ(client.device_count(), 3);
}

TEST(Event, AnExceptionInAnOnReadyCallbackDoesNotTerminate) {
  take_callback_failures();
  const Client& client = tpu::testing::shared_client();
  const float x = 1;
  BufferPtr buffer = client.buffer_from_host(&x, PJRT_Buffer_Type_F32, {}, 0);
  std::atomic<bool> ran{false};
  buffer->ready_event()->on_ready([&ran](const std::string&) {
    ran = true;
    throw std::runtime_error("thrown by a test callback");
  });
  std::vector<std::string> failures;
  for (int i = 0; i < 5000 && failures.empty(); ++i) {
    failures = take_callback_failures();
    if (failures.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(ran);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], "thrown by a test callback");
}

TEST(NamedValue, ReadsEntriesOfALargerStructWithTheirOwnStride) {
  // As a plugin built with a header whose PJRT_NamedValue grew would write them.
  struct Larger {
    PJRT_NamedValue value;
    int64_t added_later[3];
  };
  static const int64_t list[] = {4, 5};
  Larger entries[4] = {};
  for (Larger& e : entries) e.value.struct_size = offsetof(Larger, added_later) + 24;
  entries[0].value.name = "an_int";
  entries[0].value.name_size = 6;
  entries[0].value.type = PJRT_NamedValue_kInt64;
  entries[0].value.int64_value = 7;
  entries[1].value.name = "newer";
  entries[1].value.name_size = 5;
  const int newer_type = 99;  // unknown to us: skipped (written as an int, as a plugin would)
  std::memcpy(&entries[1].value.type, &newer_type, sizeof newer_type);
  entries[2].value.name = "a_list";
  entries[2].value.name_size = 6;
  entries[2].value.type = PJRT_NamedValue_kInt64List;
  entries[2].value.int64_array_value = list;
  entries[2].value.value_size = 2;
  entries[3].value.name = "a_string";
  entries[3].value.name_size = 8;
  entries[3].value.type = PJRT_NamedValue_kString;
  entries[3].value.string_value = "abc";
  entries[3].value.value_size = 3;
  std::vector<NamedValue> read = read_named_values(&entries[0].value, 4);
  ASSERT_EQ(read.size(), 3u);
  EXPECT_EQ(read[0].name, "an_int");
  EXPECT_EQ(std::get<int64_t>(read[0].value), 7);
  EXPECT_EQ(read[1].name, "a_list");
  EXPECT_EQ(std::get<std::vector<int64_t>>(read[1].value), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(to_string(read[2].value), "abc");
}

TEST(NamedValue, EntriesSmallerThanOursAreNotRead) {
  PJRT_NamedValue entries[2] = {};
  entries[0].struct_size = offsetof(PJRT_NamedValue, value_size);  // lacks value_size
  entries[1].struct_size = offsetof(PJRT_NamedValue, value_size);
  EXPECT_TRUE(read_named_values(entries, 2).empty());
  EXPECT_TRUE(read_named_values(nullptr, 0).empty());
}

TEST(NamedValue, OptionsBecomeZeroedEntriesOfEachType) {
  const std::vector<CreateOption> options = {{"s", std::string("ab")},
                                             {"b", true},
                                             {"f", 0.25},
                                             {"i", int64_t{-3}},
                                             {"l", std::vector<int64_t>{1, 2, 3}}};
  std::vector<PJRT_NamedValue> values = to_pjrt(options);
  ASSERT_EQ(values.size(), 5u);
  for (const PJRT_NamedValue& value : values) {
    EXPECT_EQ(value.struct_size, PJRT_NamedValue_STRUCT_SIZE);
    EXPECT_EQ(value.extension_start, nullptr);
  }
  EXPECT_EQ(values[0].type, PJRT_NamedValue_kString);
  EXPECT_EQ(std::string(values[0].string_value, values[0].value_size), "ab");
  EXPECT_EQ(values[1].type, PJRT_NamedValue_kBool);
  EXPECT_TRUE(values[1].bool_value);
  EXPECT_EQ(values[2].type, PJRT_NamedValue_kFloat);
  EXPECT_EQ(values[2].float_value, 0.25f);
  EXPECT_EQ(values[3].type, PJRT_NamedValue_kInt64);
  EXPECT_EQ(values[3].int64_value, -3);
  EXPECT_EQ(values[4].type, PJRT_NamedValue_kInt64List);
  EXPECT_EQ(values[4].value_size, 3u);
  // Read back as a plugin would hand them out.
  std::vector<NamedValue> read = read_named_values(values.data(), values.size());
  ASSERT_EQ(read.size(), 5u);
  EXPECT_EQ(to_string(read[2].value), "0.25");
  EXPECT_EQ(to_string(read[4].value), "1,2,3");
}

}  // namespace
}  // namespace tpu::pjrt
