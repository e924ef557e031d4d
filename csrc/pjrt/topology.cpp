#include "topology.h"

#include <stdexcept>

#include "compile_options.h"
#include "error.h"

namespace tpu::pjrt {

void Topology::Destroyer::operator()(PJRT_TopologyDescription* topology) const {
  auto args = PJRT_ARGS(PJRT_TopologyDescription_Destroy_Args);
  args.topology = topology;
  PJRT_Error* error = api->PJRT_TopologyDescription_Destroy(&args);
  if (error != nullptr) take_message(api, error);  // a destructor must not throw
}

Topology::Topology(std::shared_ptr<const Plugin> plugin, const std::string& name,
                   const std::vector<std::pair<std::string, NamedValueData>>& options)
    : plugin_(std::move(plugin)), name_(name), topology_(nullptr, Destroyer{plugin_->api()}) {
  const Plugin& p = *plugin_;
  const bool usable = PJRT_HAS(p, PJRT_TopologyDescription_Create) &&
                      PJRT_HAS(p, PJRT_TopologyDescription_Destroy) &&
                      PJRT_HAS(p, PJRT_TopologyDescription_PlatformName) &&
                      PJRT_HAS(p, PJRT_TopologyDescription_PlatformVersion) &&
                      PJRT_HAS(p, PJRT_TopologyDescription_GetDeviceDescriptions) &&
                      PJRT_HAS(p, PJRT_Compile) && PJRT_HAS(p, PJRT_Executable_Destroy);
  if (!usable) {
    throw std::runtime_error("PJRT plugin '" + p.path() +
                             "' cannot compile without a device: it lacks the topology or "
                             "PJRT_Compile entries of the PJRT C API");
  }
  const PJRT_Api* api = p.api();
  std::vector<PJRT_NamedValue> values = to_pjrt(options);  // points into `options`
  auto create = PJRT_ARGS(PJRT_TopologyDescription_Create_Args);
  create.topology_name = name_.data();
  create.topology_name_size = name_.size();
  create.create_options = values.data();
  create.num_options = values.size();
  check(api, api->PJRT_TopologyDescription_Create(&create),
        ("PJRT_TopologyDescription_Create('" + name_ + "')").c_str());
  if (create.topology == nullptr) {
    throw std::runtime_error("PJRT_TopologyDescription_Create('" + name_ +
                             "') returned no topology and no error");
  }
  topology_.reset(create.topology);

  // The strings and descriptions belong to the topology: copied.
  auto platform = PJRT_ARGS(PJRT_TopologyDescription_PlatformName_Args);
  platform.topology = topology_.get();
  check(api, api->PJRT_TopologyDescription_PlatformName(&platform),
        "PJRT_TopologyDescription_PlatformName");
  platform_name_.assign(platform.platform_name, platform.platform_name_size);

  auto version = PJRT_ARGS(PJRT_TopologyDescription_PlatformVersion_Args);
  version.topology = topology_.get();
  check(api, api->PJRT_TopologyDescription_PlatformVersion(&version),
        "PJRT_TopologyDescription_PlatformVersion");
  platform_version_.assign(version.platform_version, version.platform_version_size);

  auto devices = PJRT_ARGS(PJRT_TopologyDescription_GetDeviceDescriptions_Args);
  devices.topology = topology_.get();
  check(api, api->PJRT_TopologyDescription_GetDeviceDescriptions(&devices),
        "PJRT_TopologyDescription_GetDeviceDescriptions");
  for (size_t i = 0; i < devices.num_descriptions; ++i) {
    devices_.push_back(read_device_description(api, devices.descriptions[i]));
  }
}

std::unique_ptr<CompiledProgram> Topology::compile(const std::string& mlir,
                                                   const std::string& options) const {
  const PJRT_Api* api = plugin_->api();
  PJRT_Program program = mlir_program(mlir);
  auto args = PJRT_ARGS(PJRT_Compile_Args);
  args.topology = topology_.get();
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  args.client = nullptr;  // compile-only: no device to tune for
  check(api, api->PJRT_Compile(&args), ("compiling for " + name_ + " failed").c_str());
  if (args.executable == nullptr) {
    throw std::runtime_error("PJRT_Compile for " + name_ + " returned no executable and no error");
  }
  return std::make_unique<CompiledProgram>(plugin_, args.executable);
}

}  // namespace tpu::pjrt
