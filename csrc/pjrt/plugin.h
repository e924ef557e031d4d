#pragma once
// A loaded PJRT plugin: the shared library, its PJRT_Api table, its version and
// attributes. Lives for the whole process (plugins cannot be safely unloaded).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

// A PJRT_Api entry by name and offsetof(PJRT_Api, name).
struct ApiEntry {
  const char* name;
  size_t offset;
};

// The entries torch_tpu calls unconditionally (a static array of `*count` entries); the
// one list Plugin::load checks a plugin's table against.
const ApiEntry* required_api_entries(size_t* count);

class Plugin {
 public:
  // Loads `path`, checks the API version and the table (every entry of
  // required_api_entries() present and non-null), and calls PJRT_Plugin_Initialize.
  // Throws std::runtime_error naming the path and the reason on any failure: a different
  // major version (naming the plugin's version and ours), the missing entries.
  static std::shared_ptr<Plugin> load(const std::string& path);

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int api_major() const { return major_; }
  int api_minor() const { return minor_; }
  // String form of PJRT_Plugin_Attributes ("xla_version" -> "...", ...).
  const std::map<std::string, std::string>& attributes() const { return attributes_; }

  // Whether the plugin's PJRT_Api table reaches the entry at `offset` (offsetof PJRT_Api).
  bool has_entry(size_t offset) const;
  // Whether it reaches that entry and the entry is non-null (see PJRT_HAS).
  bool entry_is_set(size_t offset) const;

 private:
  Plugin() = default;
  // Throws unless the version and required entries are usable (see load).
  void check_api();
  void read_attributes();

  std::string path_;
  void* handle_ = nullptr;
  const PJRT_Api* api_ = nullptr;
  int major_ = 0;
  int minor_ = 0;
  std::map<std::string, std::string> attributes_;
};

}  // namespace tpu::pjrt

// True when the plugin's PJRT_Api is long enough to hold `field` and it is set. Every call
// of an entry that is not in required_api_entries() must be guarded by it.
#define PJRT_HAS(plugin, field) ((plugin).entry_is_set(offsetof(PJRT_Api, field)))
