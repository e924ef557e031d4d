// torch_tpu._C entry points of the compile-only targets: topologies of chips that need not
// be present, compiling for them, and checking every program of this process for them
// (torch_tpu/targets.py wraps them; it checks names and options before they get here).
#include <torch/csrc/utils/pybind.h>

#include <map>
#include <memory>
#include <mutex>

#include "hlo/collective_programs.h"
#include "pjrt/compile_options.h"
#include "pjrt/topology.h"
#include "runtime/cache_identity.h"
#include "runtime/disk_cache.h"
#include "runtime/target_check.h"

namespace py = pybind11;

namespace tpu {
namespace {

// One load per plugin file: a plugin is initialized once and never unloaded.
std::shared_ptr<const pjrt::Plugin> plugin_at(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const pjrt::Plugin>> plugins;
  std::lock_guard<std::mutex> lock(mutex);
  auto found = plugins.find(path);
  if (found != plugins.end()) return found->second;
  auto plugin = pjrt::Plugin::load(path);
  plugins[path] = plugin;
  return plugin;
}

py::dict device_dict(const pjrt::DeviceInfo& device) {
  py::dict out;
  out["id"] = device.id;
  out["kind"] = device.kind;
  out["description"] = device.description;
  py::dict attributes;
  for (const auto& [name, values] : device.int_attributes) attributes[py::str(name)] = values;
  out["attributes"] = attributes;
  return out;
}

py::object memory_dict(const std::optional<pjrt::CompiledMemory>& memory) {
  if (!memory) return py::none();
  py::dict out;
  out["code"] = memory->code;
  out["arguments"] = memory->arguments;
  out["outputs"] = memory->outputs;
  out["aliased"] = memory->aliased;
  out["temporaries"] = memory->temporaries;
  out["peak"] = memory->peak();
  return out;
}

py::dict result_dict(const runtime::TargetResult& result) {
  py::dict out;
  out["target"] = result.target;
  out["label"] = result.label;
  out["dump_path"] = result.dump_path;
  out["program_hash"] = result.program_hash;
  out["replicas"] = result.replicas;
  out["compiled"] = result.compiled;
  out["error"] = result.error;
  out["note"] = result.note;
  out["memory"] = memory_dict(result.memory);
  out["costs"] = result.costs;
  out["seconds"] = result.seconds;
  out["uses"] = result.uses;
  return out;
}

using Options = std::vector<std::pair<std::string, pjrt::NamedValueData>>;

std::shared_ptr<pjrt::Topology> make_topology(const std::string& plugin_path,
                                              const std::string& name, const Options& options) {
  auto plugin = plugin_at(plugin_path);
  return std::make_shared<pjrt::Topology>(plugin, name, options);
}

}  // namespace

void register_target_bindings(py::module& m) {
  py::class_<pjrt::CompiledProgram, std::shared_ptr<pjrt::CompiledProgram>>(m, "_CompiledProgram")
      .def("memory", [](const pjrt::CompiledProgram& p) { return memory_dict(p.memory()); })
      .def("cost_analysis", &pjrt::CompiledProgram::cost_analysis)
      .def("serialize", [](const pjrt::CompiledProgram& p) { return py::bytes(p.serialize()); });

  py::class_<pjrt::Topology, std::shared_ptr<pjrt::Topology>>(m, "_Topology")
      .def(py::init(&make_topology), py::arg("plugin_path"), py::arg("name"),
           py::arg("options") = Options{}, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("name", &pjrt::Topology::name)
      .def_property_readonly("platform_name", &pjrt::Topology::platform_name)
      .def_property_readonly("platform_version", &pjrt::Topology::platform_version)
      .def("devices",
           [](const pjrt::Topology& t) {
             py::list out;
             for (const auto& device : t.devices()) out.append(device_dict(device));
             return out;
           })
      .def(
          "compile",
          [](const pjrt::Topology& t, const std::string& mlir, const py::bytes& options) {
            std::string bytes = options;
            std::shared_ptr<pjrt::CompiledProgram> compiled;
            {
              py::gil_scoped_release no_gil;
              compiled = t.compile(mlir, bytes);
            }
            return compiled;
          },
          py::arg("mlir"), py::arg("options"));

  // Serialized compile options: one device (portable), or replicated over device ids.
  m.def("_portable_compile_options", [] { return py::bytes(pjrt::portable_compile_options()); });
  m.def("_replicated_compile_options", [](const std::vector<int64_t>& ids) {
    return py::bytes(pjrt::replicated_compile_options(ids));
  });
  // Just the override field: appended to any serialized options, it merges into them.
  m.def("_string_option_override", [](const std::string& name, const std::string& value) {
    return py::bytes(pjrt::with_string_option_override("", name, value));
  });
  // The XLA collective engine's program of `kind` over `replicas` devices (for pod targets).
  m.def(
      "_collective_program",
      [](const std::string& kind, int64_t replicas, int64_t count, const std::string& dtype,
         const std::vector<std::vector<int64_t>>& groups) {
        static const std::map<std::string, hlo::ElementType> kTypes = {
            {"float32", hlo::ElementType::F32},
            {"bfloat16", hlo::ElementType::BF16},
            {"float16", hlo::ElementType::F16},
            {"int32", hlo::ElementType::S32},
            {"uint8", hlo::ElementType::U8}};
        auto found = kTypes.find(dtype);
        if (found == kTypes.end()) {
          throw std::invalid_argument("collective program dtype '" + dtype +
                                      "': expected float32, bfloat16, float16, int32 or uint8");
        }
        return hlo::collective_program(kind, replicas, count, found->second, groups);
      },
      py::arg("kind"), py::arg("replicas"), py::arg("count"), py::arg("dtype"),
      py::arg("groups") = std::vector<std::vector<int64_t>>{});
  m.def("_bool_option_override", [](const std::string& name, bool value) {
    return py::bytes(pjrt::with_option_override("", name, value));
  });
  m.def("_target_cache_identity", [](const pjrt::Topology& t, const std::string& version) {
    const std::string kind = t.devices().empty() ? "" : t.devices()[0].kind;
    return runtime::cache_identity(
        runtime::CacheTarget{t.plugin(), t.platform_name(), t.platform_version(), kind}, version);
  });

  // targets: (name, topology, extra options, fallback options, fallback name, warm-cache
  // directory or "", torch_tpu version).
  m.def(
      "_target_check_set",
      [](const std::vector<std::tuple<std::string, std::shared_ptr<pjrt::Topology>, py::bytes,
                                      py::bytes, std::string, std::string, std::string>>& targets) {
        std::vector<runtime::TargetSpec> specs;
        for (const auto& [name, topology, extra, fallback, fallback_name, warm_dir, version] :
             targets) {
          runtime::TargetSpec spec;
          spec.name = name;
          spec.topology = topology;
          spec.extra_options = extra;
          spec.fallback_options = fallback;
          spec.fallback_name = fallback_name;
          if (!warm_dir.empty()) {
            const std::string kind = topology->devices().empty() ? "" : topology->devices()[0].kind;
            spec.warm_cache = std::make_shared<runtime::DiskCache>(
                warm_dir, int64_t{1} << 40,
                runtime::cache_identity(
                    runtime::CacheTarget{topology->plugin(), topology->platform_name(),
                                         topology->platform_version(), kind},
                    version));
          }
          specs.push_back(std::move(spec));
        }
        py::gil_scoped_release no_gil;
        runtime::target_check().set_targets(std::move(specs));
      });
  m.def(
      "_target_check_submit",
      [](const std::string& program, const std::string& label, const py::bytes& options,
         const std::string& path) {
        runtime::target_check().submit(program, label, options, path);
      },
      py::arg("program"), py::arg("label"), py::arg("options"), py::arg("path") = "");
  m.def("_target_check_pending", [] { return runtime::target_check().pending(); });
  m.def("_target_check_results", [] {
    std::vector<runtime::TargetResult> results;
    {
      py::gil_scoped_release no_gil;
      results = runtime::target_check().results();
    }
    py::list out;
    for (const auto& result : results) out.append(result_dict(result));
    return out;
  });
}

}  // namespace tpu
