#include "client.h"

#include <stdexcept>

#include "element_type.h"
#include "error.h"

namespace tpu::pjrt {

void Client::ClientDestroyer::operator()(PJRT_Client* client) const {
  auto args = PJRT_ARGS(PJRT_Client_Destroy_Args);
  args.client = client;
  PJRT_Error* error = api->PJRT_Client_Destroy(&args);
  if (error != nullptr) take_message(api, error);  // a destructor must not throw
}

Client::Client(std::shared_ptr<const Plugin> plugin, const std::vector<CreateOption>& options,
               std::shared_ptr<KeyValueStore> key_values)
    : plugin_(std::move(plugin)),
      key_values_(std::move(key_values)),
      client_(nullptr, ClientDestroyer{plugin_->api()}) {
  const PJRT_Api* api = plugin_->api();
  std::vector<PJRT_NamedValue> values = to_pjrt(options);  // points into `options`
  auto create = PJRT_ARGS(PJRT_Client_Create_Args);
  create.create_options = values.data();
  create.num_options = values.size();
  if (key_values_ != nullptr) {
    const KeyValueCallbacks& callbacks = key_value_callbacks();
    create.kv_get_callback = callbacks.get;
    create.kv_get_user_arg = key_values_.get();
    create.kv_put_callback = callbacks.put;
    create.kv_put_user_arg = key_values_.get();
    create.kv_try_get_callback = callbacks.try_get;
    create.kv_try_get_user_arg = key_values_.get();
  }
  check(api, api->PJRT_Client_Create(&create), "PJRT_Client_Create");
  client_.reset(create.client);

  // The devices array and the strings below belong to the client: copied.
  auto devices = PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
  devices.client = client_.get();
  check(api, api->PJRT_Client_AddressableDevices(&devices), "PJRT_Client_AddressableDevices");
  devices_.assign(devices.addressable_devices,
                  devices.addressable_devices + devices.num_addressable_devices);

  auto name = PJRT_ARGS(PJRT_Client_PlatformName_Args);
  name.client = client_.get();
  check(api, api->PJRT_Client_PlatformName(&name), "PJRT_Client_PlatformName");
  platform_name_.assign(name.platform_name, name.platform_name_size);

  auto version = PJRT_ARGS(PJRT_Client_PlatformVersion_Args);
  version.client = client_.get();
  check(api, api->PJRT_Client_PlatformVersion(&version), "PJRT_Client_PlatformVersion");
  platform_version_.assign(version.platform_version, version.platform_version_size);
}

PJRT_Device* Client::device(int index) const {
  if (index < 0 || index >= device_count()) {
    throw std::out_of_range("tpu device index " + std::to_string(index) + " is out of range (" +
                            std::to_string(device_count()) + " devices)");
  }
  return devices_[index];
}

DeviceInfo Client::device_info(int index) const {
  const PJRT_Api* api = plugin_->api();
  auto get = PJRT_ARGS(PJRT_Device_GetDescription_Args);
  get.device = device(index);
  check(api, api->PJRT_Device_GetDescription(&get), "PJRT_Device_GetDescription");
  return read_device_description(api, get.device_description);
}

std::optional<int64_t> Client::memory_limit(int index) const {
  const PJRT_Api* api = plugin_->api();
  auto args = PJRT_ARGS(PJRT_Device_MemoryStats_Args);
  args.device = device(index);
  // Optional: a plugin may leave the entry out (or null) rather than return UNIMPLEMENTED.
  if (!PJRT_HAS(*plugin_, PJRT_Device_MemoryStats)) return std::nullopt;
  if (PJRT_Error* error = api->PJRT_Device_MemoryStats(&args)) {
    take_message(api, error);  // unimplemented by the plugin: no limit to report
    return std::nullopt;
  }
  if (!args.bytes_limit_is_set || args.bytes_limit <= 0) return std::nullopt;
  return args.bytes_limit;
}

BufferPtr Client::upload(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims,
                         int device_index, PJRT_HostBufferSemantics semantics,
                         std::function<void()> done_with_host) const {
  element_size(type);  // throws for types that would make the plugin abort
  const PJRT_Api* api = plugin_->api();
  auto args = PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client_.get();
  args.data = data;
  args.type = type;
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.host_buffer_semantics = semantics;
  args.device = device(device_index);
  try {
    check(api, api->PJRT_Client_BufferFromHostBuffer(&args), "PJRT_Client_BufferFromHostBuffer");
  } catch (...) {
    done_with_host();
    throw;
  }
  // The event is owned before the allocation below can throw, so it is destroyed on every
  // path. A null event (the plugin copied during the call) runs done_with_host at once.
  Event done(plugin_, args.done_with_host_buffer);
  auto buffer = std::make_shared<Buffer>(plugin_, args.buffer);
  auto release = std::make_shared<std::function<void()>>(std::move(done_with_host));
  try {
    done.on_ready([release](const std::string&) { (*release)(); });
  } catch (...) {
    // No callback will run: the plugin may still read the host memory, so wait for it
    // before handing the memory back.
    try {
      done.await();
    } catch (...) {
    }
    (*release)();
    throw;
  }
  return buffer;
}

BufferPtr Client::buffer_from_host(const void* data, PJRT_Buffer_Type type,
                                   const std::vector<int64_t>& dims, int device_index) const {
  // The plugin has copied the data when the call returns: nothing to wait for.
  return upload(data, type, dims, device_index, PJRT_HostBufferSemantics_kImmutableOnlyDuringCall,
                [] {});
}

BufferPtr Client::buffer_from_host_async(const void* data, PJRT_Buffer_Type type,
                                         const std::vector<int64_t>& dims, int device_index,
                                         std::function<void()> done_with_host) const {
  return upload(data, type, dims, device_index,
                PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes,
                std::move(done_with_host));
}

BufferPtr Client::buffer_aliasing_host(const void* data, PJRT_Buffer_Type type,
                                       const std::vector<int64_t>& dims, int device_index,
                                       std::function<void()> release) const {
  return upload(data, type, dims, device_index, PJRT_HostBufferSemantics_kImmutableZeroCopy,
                std::move(release));
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir) const {
  return compile(mlir, portable_compile_options());
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir,
                                            const std::string& options) const {
  const PJRT_Api* api = plugin_->api();
  PJRT_Program program = mlir_program(mlir);
  auto args = PJRT_ARGS(PJRT_Client_Compile_Args);
  args.client = client_.get();
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  check(api, api->PJRT_Client_Compile(&args), "compiling StableHLO failed");
  return std::make_unique<Executable>(plugin_, args.executable);
}

PJRT_Error* Client::deserialize_and_load(const std::string& bytes, const std::string& options,
                                         PJRT_LoadedExecutable** loaded) const {
  auto args = PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
  args.client = client_.get();
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  if (!options.empty()) {
    args.overridden_serialized_compile_options = options.data();
    args.overridden_serialized_compile_options_size = options.size();
  }
  PJRT_Error* error = plugin_->api()->PJRT_Executable_DeserializeAndLoad(&args);
  *loaded = args.loaded_executable;
  return error;
}

std::unique_ptr<Executable> Client::deserialize(const std::string& bytes,
                                                const std::string& options) const {
  if (bytes.empty()) throw std::invalid_argument("cannot deserialize an empty executable");
  PJRT_LoadedExecutable* loaded = nullptr;
  check(plugin_->api(), deserialize_and_load(bytes, options, &loaded),
        "PJRT_Executable_DeserializeAndLoad");
  return std::make_unique<Executable>(plugin_, loaded);
}

std::unique_ptr<Executable> Client::try_deserialize(const std::string& bytes,
                                                    std::string* why) const {
  if (bytes.empty()) {
    *why = "the entry is empty";
    return nullptr;
  }
  PJRT_LoadedExecutable* loaded = nullptr;
  if (PJRT_Error* error = deserialize_and_load(bytes, "", &loaded)) {
    *why = take_message(plugin_->api(), error);
    return nullptr;
  }
  return std::make_unique<Executable>(plugin_, loaded);
}

}  // namespace tpu::pjrt
