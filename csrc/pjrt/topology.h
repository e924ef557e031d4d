#pragma once
// A compile-only target: a plugin's description of chips that need not be present, such
// as libtpu's "v6e:2x2" or the GPU plugin's "1x1x8" with an H100 target config
// (PJRT_TopologyDescription_Create). Programs compile for it with no client and no device
// (PJRT_Compile); nothing runs. Names and options are passed as given: some plugins abort
// the process on a misuse (an int64 "topology" option for the GPU plugin), so whoever
// builds one checks them first (torch_tpu/targets.py).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiled_program.h"
#include "device_description.h"
#include "named_value.h"
#include "plugin.h"

namespace tpu::pjrt {

class Topology {
 public:
  // Throws std::runtime_error where the plugin cannot compile without a device (the
  // entries are missing), Error with the plugin's message where it refuses the name.
  Topology(std::shared_ptr<const Plugin> plugin, const std::string& name,
           const std::vector<std::pair<std::string, NamedValueData>>& options = {});
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  const Plugin& plugin() const { return *plugin_; }
  const std::string& name() const { return name_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  // Every device of the topology, in the plugin's order (TPU: x fastest; a TPU7x chip's
  // two cores are two devices at the same coordinates).
  const std::vector<DeviceInfo>& devices() const { return devices_; }

  // Compiles StableHLO (MLIR text) with serialized xla.CompileOptionsProto `options`.
  // Throws Error with the compiler's message where it refuses the program. Safe to call
  // from several threads.
  std::unique_ptr<CompiledProgram> compile(const std::string& mlir,
                                           const std::string& options) const;

 private:
  struct Destroyer {
    const PJRT_Api* api;
    void operator()(PJRT_TopologyDescription* topology) const;
  };

  std::shared_ptr<const Plugin> plugin_;
  std::string name_;
  std::unique_ptr<PJRT_TopologyDescription, Destroyer> topology_;
  std::string platform_name_;
  std::string platform_version_;
  std::vector<DeviceInfo> devices_;
};

}  // namespace tpu::pjrt
