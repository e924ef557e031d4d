#include "plugin.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "error.h"
#include "named_value.h"

namespace tpu::pjrt {

namespace {

// The oldest PJRT C API we accept: serialize/deserialize and
// non_donatable_input_indices are older than this.
constexpr int kMinMinor = 40;

#define TPU_PJRT_ENTRY(name) (ApiEntry{#name, offsetof(PJRT_Api, name)})

// Every PJRT_Api entry torch_tpu calls without asking first (csrc/pjrt is the only caller
// of the table). A plugin must have each one inside its table's struct_size and non-null;
// Plugin::load refuses one that does not, rather than crash on the first call.
// Entries used only where the plugin has them are checked with PJRT_HAS at their call
// site instead: PJRT_Plugin_Attributes (Plugin::read_attributes) and
// PJRT_Device_MemoryStats (Client::memory_limit). A new call into the table goes in
// exactly one of these two places.
constexpr ApiEntry kRequiredEntries[] = {
    TPU_PJRT_ENTRY(PJRT_Error_Destroy),
    TPU_PJRT_ENTRY(PJRT_Error_Message),
    TPU_PJRT_ENTRY(PJRT_Error_GetCode),
    TPU_PJRT_ENTRY(PJRT_Plugin_Initialize),
    TPU_PJRT_ENTRY(PJRT_Event_Destroy),
    TPU_PJRT_ENTRY(PJRT_Event_IsReady),
    TPU_PJRT_ENTRY(PJRT_Event_Await),
    TPU_PJRT_ENTRY(PJRT_Event_OnReady),
    TPU_PJRT_ENTRY(PJRT_Client_Create),
    TPU_PJRT_ENTRY(PJRT_Client_Destroy),
    TPU_PJRT_ENTRY(PJRT_Client_PlatformName),
    TPU_PJRT_ENTRY(PJRT_Client_PlatformVersion),
    TPU_PJRT_ENTRY(PJRT_Client_AddressableDevices),
    TPU_PJRT_ENTRY(PJRT_Client_Compile),
    TPU_PJRT_ENTRY(PJRT_Client_BufferFromHostBuffer),
    TPU_PJRT_ENTRY(PJRT_DeviceDescription_Id),
    TPU_PJRT_ENTRY(PJRT_DeviceDescription_Attributes),
    TPU_PJRT_ENTRY(PJRT_DeviceDescription_Kind),
    TPU_PJRT_ENTRY(PJRT_DeviceDescription_ToString),
    TPU_PJRT_ENTRY(PJRT_Device_GetDescription),
    TPU_PJRT_ENTRY(PJRT_Executable_Destroy),
    TPU_PJRT_ENTRY(PJRT_Executable_NumOutputs),
    TPU_PJRT_ENTRY(PJRT_Executable_Serialize),
    TPU_PJRT_ENTRY(PJRT_LoadedExecutable_Destroy),
    TPU_PJRT_ENTRY(PJRT_LoadedExecutable_GetExecutable),
    TPU_PJRT_ENTRY(PJRT_LoadedExecutable_Execute),
    TPU_PJRT_ENTRY(PJRT_Executable_DeserializeAndLoad),
    TPU_PJRT_ENTRY(PJRT_Buffer_Destroy),
    TPU_PJRT_ENTRY(PJRT_Buffer_ElementType),
    TPU_PJRT_ENTRY(PJRT_Buffer_Dimensions),
    TPU_PJRT_ENTRY(PJRT_Buffer_OnDeviceSizeInBytes),
    TPU_PJRT_ENTRY(PJRT_Buffer_IsDeleted),
    TPU_PJRT_ENTRY(PJRT_Buffer_ToHostBuffer),
    TPU_PJRT_ENTRY(PJRT_Buffer_ReadyEvent),
    TPU_PJRT_ENTRY(PJRT_Buffer_UnsafePointer),
};

#undef TPU_PJRT_ENTRY

// dlerror() text, or "?" where there is none.
std::string dl_error() {
  const char* why = dlerror();
  return why != nullptr ? why : "?";
}

}  // namespace

const ApiEntry* required_api_entries(size_t* count) {
  *count = sizeof(kRequiredEntries) / sizeof(kRequiredEntries[0]);
  return kRequiredEntries;
}

std::shared_ptr<Plugin> Plugin::load(const std::string& path) {
  std::shared_ptr<Plugin> plugin(new Plugin());
  plugin->path_ = path;
  // RTLD_LOCAL keeps the plugin's many bundled symbols (LLVM, protobuf, absl)
  // from clashing with torch's.
  plugin->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (plugin->handle_ == nullptr) {
    throw std::runtime_error("cannot load PJRT plugin '" + path + "': " + dl_error());
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(plugin->handle_, "GetPjrtApi"));
  if (get_api == nullptr) {
    throw std::runtime_error("'" + path + "' is not a PJRT plugin: it has no GetPjrtApi symbol");
  }
  plugin->api_ = get_api();
  if (plugin->api_ == nullptr) {
    throw std::runtime_error("PJRT plugin '" + path + "': GetPjrtApi returned null");
  }
  plugin->check_api();
  auto init = PJRT_ARGS(PJRT_Plugin_Initialize_Args);
  check(plugin->api_, plugin->api_->PJRT_Plugin_Initialize(&init), "PJRT_Plugin_Initialize");
  plugin->read_attributes();
  return plugin;
}

void Plugin::check_api() {
  // The version is read from the table, so the table must reach past it.
  if (api_->struct_size < offsetof(PJRT_Api, pjrt_api_version) + sizeof(PJRT_Api_Version)) {
    throw std::runtime_error("PJRT plugin '" + path_ + "': its PJRT_Api table is " +
                             std::to_string(api_->struct_size) +
                             " bytes, too short to hold a version");
  }
  major_ = api_->pjrt_api_version.major_version;
  minor_ = api_->pjrt_api_version.minor_version;
  // A different major version rearranged the table or argument structs: nothing in it can
  // be called safely. A newer minor version only appends (entries, struct fields) and
  // reads only the prefix of our argument structs their struct_size announces, so it is
  // accepted; an older one must still have every entry we call (checked below).
  if (major_ != PJRT_API_MAJOR || minor_ < kMinMinor) {
    std::ostringstream msg;
    msg << "PJRT plugin '" << path_ << "' has PJRT C API " << major_ << "." << minor_
        << "; torch_tpu was built with " << PJRT_API_MAJOR << "." << PJRT_API_MINOR
        << " and accepts plugins of " << PJRT_API_MAJOR << "." << kMinMinor << " or newer "
        << "with the same major version: use a plugin built for PJRT C API " << PJRT_API_MAJOR
        << ".x";
    throw std::runtime_error(msg.str());
  }
  std::string missing;
  size_t count = 0;
  const ApiEntry* entries = required_api_entries(&count);
  for (size_t i = 0; i < count; ++i) {
    if (entry_is_set(entries[i].offset)) continue;
    missing += (missing.empty() ? "" : ", ") + std::string(entries[i].name);
  }
  if (!missing.empty()) {
    std::ostringstream msg;
    msg << "PJRT plugin '" << path_ << "' (PJRT C API " << major_ << "." << minor_ << ", a "
        << api_->struct_size
        << "-byte PJRT_Api table) lacks entries torch_tpu requires: " << missing;
    throw std::runtime_error(msg.str());
  }
}

bool Plugin::has_entry(size_t offset) const { return offset + sizeof(void*) <= api_->struct_size; }

bool Plugin::entry_is_set(size_t offset) const {
  if (!has_entry(offset)) return false;
  void* entry = nullptr;
  std::memcpy(&entry, reinterpret_cast<const unsigned char*>(api_) + offset, sizeof entry);
  return entry != nullptr;
}

void Plugin::read_attributes() {
  if (!PJRT_HAS(*this, PJRT_Plugin_Attributes)) return;
  auto args = PJRT_ARGS(PJRT_Plugin_Attributes_Args);
  check(api_, api_->PJRT_Plugin_Attributes(&args), "PJRT_Plugin_Attributes");
  for (const NamedValue& value : read_named_values(args.attributes, args.num_attributes)) {
    attributes_[value.name] = to_string(value.value);
  }
}

}  // namespace tpu::pjrt
