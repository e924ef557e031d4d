#pragma once
// Owner of one PJRT_Client: the devices of one plugin, transfers and compilation.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "buffer.h"
#include "compile_options.h"
#include "device_description.h"
#include "executable.h"
#include "key_value_store.h"
#include "named_value.h"
#include "plugin.h"

namespace tpu::pjrt {

// An option of PJRT_Client_Create: a bool, an integer, a float, a string or a list of
// integers, such as the CPU plugin's ("cpu_device_count", int64_t{2}) or the GPU plugin's
// ("platform_name", "cuda"), ("allocator", "bfc"), ("memory_fraction", 0.5),
// ("preallocate", false), ("visible_devices", std::vector<int64_t>{1}). Each plugin defines
// its own: the CPU plugin (xla-cpu-pjrt 0.0.1) ignores names it does not know, but a known
// name with another type makes it throw std::bad_variant_access through the C API (seen
// escaping PJRT_Client_Create; undefined behaviour), so give each option the plugin's type.
using CreateOption = std::pair<std::string, NamedValueData>;

class Client {
 public:
  // `key_values` (shared by the job's processes, kept alive as long as the client) is
  // offered to the plugin for a multi-process client; the plugin may ignore it.
  explicit Client(std::shared_ptr<const Plugin> plugin,
                  const std::vector<CreateOption>& options = {},
                  std::shared_ptr<KeyValueStore> key_values = nullptr);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Plugin& plugin() const { return *plugin_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  DeviceInfo device_info(int index) const;
  // The memory the plugin lets `index` allocate (PJRT_Device_MemoryStats' bytes_limit),
  // or nothing where the plugin does not say (the CPU plugin).
  std::optional<int64_t> memory_limit(int index) const;

  // Copies a dense row-major host array to `device`. The host memory may be reused
  // as soon as this returns.
  BufferPtr buffer_from_host(const void* data, PJRT_Buffer_Type type,
                             const std::vector<int64_t>& dims, int device) const;
  // Starts copying a dense row-major host array to `device` and returns at once
  // (kImmutableUntilTransferCompletes): `data` must stay alive and unchanged until
  // `done_with_host` runs (on a plugin thread, or here if the plugin copied during the
  // call). Work on the buffer is ordered after the copy by its ready event.
  BufferPtr buffer_from_host_async(const void* data, PJRT_Buffer_Type type,
                                   const std::vector<int64_t>& dims, int device,
                                   std::function<void()> done_with_host) const;
  // A buffer that may alias `data` instead of copying it (kImmutableZeroCopy): the
  // memory must stay alive and unchanged until `release` is called, which happens
  // once the plugin is done with it (at once if it copied after all, otherwise when
  // the buffer is destroyed).
  BufferPtr buffer_aliasing_host(const void* data, PJRT_Buffer_Type type,
                                 const std::vector<int64_t>& dims, int device,
                                 std::function<void()> release) const;

  // Compiles StableHLO (MLIR text) into a portable executable: one that runs on
  // whichever single device Executable::execute names.
  std::unique_ptr<Executable> compile(const std::string& mlir) const;
  // Compiles with serialized xla.CompileOptionsProto `options` (e.g.
  // replicated_compile_options for a program of collectives).
  std::unique_ptr<Executable> compile(const std::string& mlir, const std::string& options) const;
  // Loads bytes from Executable::serialize(); throws Error if they do not fit this plugin.
  // Non-empty `options` (a serialized xla.CompileOptionsProto) replace those it was compiled
  // with (e.g. replicated_compile_options({id}): a portable program loaded for one device).
  std::unique_ptr<Executable> deserialize(const std::string& bytes,
                                          const std::string& options = "") const;
  // The same, but a refusal returns nullptr with the plugin's message in `why`: no C++
  // exception is thrown while the plugin may have just undone a half-loaded program.
  std::unique_ptr<Executable> try_deserialize(const std::string& bytes, std::string* why) const;

  // The PJRT device with this index; throws std::out_of_range naming the valid range.
  PJRT_Device* device(int index) const;

 private:
  // PJRT_Executable_DeserializeAndLoad: the plugin's error (nullptr on success), unthrown.
  PJRT_Error* deserialize_and_load(const std::string& bytes, const std::string& options,
                                   PJRT_LoadedExecutable** loaded) const;
  // PJRT_Client_BufferFromHostBuffer; done_with_host runs once the plugin no longer
  // reads `data` (also when the call fails).
  BufferPtr upload(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims,
                   int device, PJRT_HostBufferSemantics semantics,
                   std::function<void()> done_with_host) const;

  // PJRT_Client_Destroy for the owned client.
  struct ClientDestroyer {
    const PJRT_Api* api;
    void operator()(PJRT_Client* client) const;
  };

  std::shared_ptr<const Plugin> plugin_;
  // Declared before client_, so destroyed after it: the plugin may call into the store
  // (from its own threads too) until the client is destroyed.
  std::shared_ptr<KeyValueStore> key_values_;
  // Owned from the moment PJRT_Client_Create returns it: if a query after it fails, the
  // constructor's unwinding destroys the client (its threads, its device memory) before
  // the store.
  std::unique_ptr<PJRT_Client, ClientDestroyer> client_;
  std::vector<PJRT_Device*> devices_;
  std::string platform_name_;
  std::string platform_version_;
};

}  // namespace tpu::pjrt
