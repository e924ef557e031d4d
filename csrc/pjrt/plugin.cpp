#include "plugin.h"

#include <dlfcn.h>

#include <sstream>
#include <stdexcept>

#include "error.h"

namespace tpu::pjrt {

namespace {

// The oldest PJRT C API we accept: serialize/deserialize and
// non_donatable_input_indices are older than this.
constexpr int kMinMinor = 40;

std::string named_value_to_string(const PJRT_NamedValue& value) {
  switch (value.type) {
    case PJRT_NamedValue_kString: return std::string(value.string_value, value.value_size);
    case PJRT_NamedValue_kInt64: return std::to_string(value.int64_value);
    case PJRT_NamedValue_kInt64List: {
      std::ostringstream out;
      for (size_t i = 0; i < value.value_size; ++i) {
        out << (i ? "," : "") << value.int64_array_value[i];
      }
      return out.str();
    }
    case PJRT_NamedValue_kFloat: return std::to_string(value.float_value);
    case PJRT_NamedValue_kBool: return value.bool_value ? "true" : "false";
  }
  return "?";
}

}  // namespace

std::shared_ptr<Plugin> Plugin::load(const std::string& path) {
  std::shared_ptr<Plugin> plugin(new Plugin());
  plugin->path_ = path;
  // RTLD_LOCAL keeps the plugin's many bundled symbols (LLVM, protobuf, absl)
  // from clashing with torch's.
  plugin->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (plugin->handle_ == nullptr) {
    const char* why = dlerror();
    throw std::runtime_error("cannot load PJRT plugin '" + path + "': " + (why ? why : "?"));
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
  plugin->major_ = plugin->api_->pjrt_api_version.major_version;
  plugin->minor_ = plugin->api_->pjrt_api_version.minor_version;
  if (plugin->major_ != PJRT_API_MAJOR || plugin->minor_ < kMinMinor) {
    std::ostringstream msg;
    msg << "PJRT plugin '" << path << "' has C API " << plugin->major_ << "." << plugin->minor_
        << "; torch_tpu needs " << PJRT_API_MAJOR << "." << kMinMinor << " or newer";
    throw std::runtime_error(msg.str());
  }
  // Every call below relies on the PJRT_Api table being long enough for the
  // entries we use; the newest one we need unconditionally is Execute.
  if (!PJRT_HAS(*plugin, PJRT_Executable_DeserializeAndLoad)) {
    throw std::runtime_error("PJRT plugin '" + path + "' lacks entries torch_tpu requires");
  }
  auto init = PJRT_ARGS(PJRT_Plugin_Initialize_Args);
  check(plugin->api_, plugin->api_->PJRT_Plugin_Initialize(&init), "PJRT_Plugin_Initialize");
  plugin->read_attributes();
  return plugin;
}

bool Plugin::has_entry(size_t offset) const { return offset + sizeof(void*) <= api_->struct_size; }

void Plugin::read_attributes() {
  if (!PJRT_HAS(*this, PJRT_Plugin_Attributes)) return;
  auto args = PJRT_ARGS(PJRT_Plugin_Attributes_Args);
  check(api_, api_->PJRT_Plugin_Attributes(&args), "PJRT_Plugin_Attributes");
  for (size_t i = 0; i < args.num_attributes; ++i) {
    const PJRT_NamedValue& value = args.attributes[i];
    attributes_[std::string(value.name, value.name_size)] = named_value_to_string(value);
  }
}

}  // namespace tpu::pjrt
