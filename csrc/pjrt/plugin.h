#pragma once
// A loaded PJRT plugin: the shared library, its PJRT_Api table, its version and
// attributes. Lives for the whole process (plugins cannot be safely unloaded).
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

class Plugin {
 public:
  // Loads `path`, checks the API version and calls PJRT_Plugin_Initialize.
  // Throws std::runtime_error naming the path and the reason on any failure.
  static std::shared_ptr<Plugin> load(const std::string& path);

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int api_major() const { return major_; }
  int api_minor() const { return minor_; }
  // String form of PJRT_Plugin_Attributes ("xla_version" -> "...", ...).
  const std::map<std::string, std::string>& attributes() const { return attributes_; }

  // Whether the plugin's PJRT_Api table has the entry at `offset` (offsetof PJRT_Api).
  bool has_entry(size_t offset) const;

 private:
  Plugin() = default;
  void read_attributes();

  std::string path_;
  void* handle_ = nullptr;
  const PJRT_Api* api_ = nullptr;
  int major_ = 0;
  int minor_ = 0;
  std::map<std::string, std::string> attributes_;
};

}  // namespace tpu::pjrt

// True when the plugin's PJRT_Api is long enough to hold `field` and it is set.
#define PJRT_HAS(plugin, field) \
  ((plugin).has_entry(offsetof(PJRT_Api, field)) && (plugin).api()->field != nullptr)
