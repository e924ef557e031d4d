// The stand-in PJRT plugin of fake_plugin.h.
#include "fake_plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "pjrt_c_api.h"

namespace {

std::mutex mutex;
TorchTpuFakePluginConfig config{};
bool configured = false;  // by TorchTpuFakePlugin_Configure, else from the environment
const PJRT_Api* real = nullptr;
std::atomic<int64_t> clients_created{0};
std::atomic<int64_t> clients_destroyed{0};
std::string last_options;

long env_number(const char* name, long fallback) {
  const char* text = std::getenv(name);
  return text != nullptr && *text != '\0' ? std::strtol(text, nullptr, 10) : fallback;
}

TorchTpuFakePluginConfig config_from_environment() {
  TorchTpuFakePluginConfig from_env{};
  from_env.major_delta = static_cast<int>(env_number("TORCH_TPU_FAKE_PJRT_MAJOR_DELTA", 0));
  from_env.minor = static_cast<int>(env_number("TORCH_TPU_FAKE_PJRT_MINOR", -1));
  from_env.table_size = static_cast<size_t>(env_number("TORCH_TPU_FAKE_PJRT_TABLE_SIZE", 0));
  from_env.platform_name = std::getenv("TORCH_TPU_FAKE_PJRT_PLATFORM");
  return from_env;
}

const PJRT_Api* load_real() {
  const char* path = std::getenv("TORCH_TPU_FAKE_PJRT_TARGET");
  if (path == nullptr || *path == '\0') path = TORCH_TPU_TEST_PLUGIN;
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "fake PJRT plugin: cannot load '%s': %s\n", path, dlerror());
    return nullptr;
  }
  auto get_api = reinterpret_cast<const PJRT_Api* (*)()>(dlsym(handle, "GetPjrtApi"));
  return get_api != nullptr ? get_api() : nullptr;
}

std::string describe(const PJRT_NamedValue& value) {
  std::ostringstream out;
  out << std::string(value.name, value.name_size) << "=";
  switch (value.type) {
    case PJRT_NamedValue_kString:
      out << "string:" << std::string(value.string_value, value.value_size);
      break;
    case PJRT_NamedValue_kInt64: out << "int64:" << value.int64_value; break;
    case PJRT_NamedValue_kInt64List:
      out << "int64_list:";
      for (size_t i = 0; i < value.value_size; ++i) {
        out << (i ? "," : "") << value.int64_array_value[i];
      }
      break;
    case PJRT_NamedValue_kFloat: out << "float:" << value.float_value; break;
    case PJRT_NamedValue_kBool: out << "bool:" << (value.bool_value ? "true" : "false"); break;
    default: out << "unknown"; break;
  }
  return out.str();
}

PJRT_Error* client_create(PJRT_Client_Create_Args* args) {
  std::string options;
  for (size_t i = 0; i < args->num_options; ++i) {
    const PJRT_NamedValue& value = args->create_options[i];
    if (value.struct_size != PJRT_NamedValue_STRUCT_SIZE) options += "struct_size mismatch: ";
    options += describe(value) + "\n";
  }
  // The CPU plugin knows none of the GPU plugin's options and throws on a known name of
  // another type: only the options it knows are handed on.
  std::vector<PJRT_NamedValue> known;
  for (size_t i = 0; i < args->num_options; ++i) {
    const PJRT_NamedValue& value = args->create_options[i];
    if (std::string(value.name, value.name_size).rfind("cpu_", 0) == 0) known.push_back(value);
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    last_options = options;
  }
  PJRT_Client_Create_Args forwarded = *args;
  forwarded.create_options = known.data();
  forwarded.num_options = known.size();
  PJRT_Error* error = real->PJRT_Client_Create(&forwarded);
  args->client = forwarded.client;
  if (error == nullptr) ++clients_created;
  return error;
}

PJRT_Error* client_destroy(PJRT_Client_Destroy_Args* args) {
  if (args->client != nullptr) ++clients_destroyed;
  return real->PJRT_Client_Destroy(args);
}

PJRT_Error* platform_name(PJRT_Client_PlatformName_Args* args) {
  PJRT_Error* error = real->PJRT_Client_PlatformName(args);
  std::lock_guard<std::mutex> lock(mutex);
  if (error == nullptr && config.platform_name != nullptr) {
    args->platform_name = config.platform_name;
    args->platform_name_size = std::strlen(config.platform_name);
  }
  return error;
}

PJRT_Error* platform_version(PJRT_Client_PlatformVersion_Args* args) {
  bool fail;
  {
    std::lock_guard<std::mutex> lock(mutex);
    fail = config.fail_platform_version;
  }
  if (!fail) return real->PJRT_Client_PlatformVersion(args);
  // A genuine PJRT_Error from the real plugin: it refuses an argument struct of size 1.
  PJRT_Client_PlatformVersion_Args bad = *args;
  bad.struct_size = 1;
  return real->PJRT_Client_PlatformVersion(&bad);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void TorchTpuFakePlugin_Configure(
    const TorchTpuFakePluginConfig* new_config) {
  std::lock_guard<std::mutex> lock(mutex);
  config = *new_config;
  configured = true;
}

__attribute__((visibility("default"))) TorchTpuFakePluginStats TorchTpuFakePlugin_Stats() {
  std::lock_guard<std::mutex> lock(mutex);
  return TorchTpuFakePluginStats{clients_created.load(), clients_destroyed.load(),
                                 last_options.c_str()};
}

__attribute__((visibility("default"))) const PJRT_Api* GetPjrtApi() {
  std::lock_guard<std::mutex> lock(mutex);
  if (real == nullptr) real = load_real();
  if (real == nullptr) return nullptr;
  if (!configured) config = config_from_environment();
  const size_t size = config.table_size != 0 ? config.table_size : real->struct_size;
  // Zero-padded to at least our header's table, so that every field below can be written.
  const size_t allocated = std::max<size_t>({size, real->struct_size, sizeof(PJRT_Api)});
  // Never freed (a Plugin may use its table to the end of the process), but kept reachable
  // so that LeakSanitizer does not report it.
  static std::vector<std::unique_ptr<unsigned char[]>> tables;
  tables.push_back(std::make_unique<unsigned char[]>(allocated));  // zeroed
  unsigned char* bytes = tables.back().get();
  std::memcpy(bytes, real, std::min<size_t>(real->struct_size, allocated));
  auto* api = reinterpret_cast<PJRT_Api*>(bytes);
  api->PJRT_Client_Create = &client_create;
  api->PJRT_Client_Destroy = &client_destroy;
  api->PJRT_Client_PlatformName = &platform_name;
  api->PJRT_Client_PlatformVersion = &platform_version;
  api->pjrt_api_version.major_version += config.major_delta;
  if (config.minor >= 0) api->pjrt_api_version.minor_version = config.minor;
  for (size_t offset : config.null_entries) {
    if (offset == 0) break;
    std::memset(bytes + offset, 0, sizeof(void*));
  }
  // Entries past a truncated size are cleared: a caller that reads one without checking
  // struct_size calls null and crashes here, as it might on a plugin that lacks them.
  if (size < allocated) std::memset(bytes + size, 0, allocated - size);
  api->struct_size = size;
  return api;
}

}  // extern "C"
