// torch_tpu._C: the Python entry points of the runtime (initialisation, device
// queries, memory statistics, metrics, fallback mode, generators).
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>

#include "aten/device.h"
#include "aten/device_errors.h"
#include "aten/eager_mode.h"
#include "aten/fallback.h"
#include "aten/generator.h"
#include "aten/ops/all.h"
#include "distributed/c10d_key_value_store.h"
#include "host_kernels/attention.h"
#include "host_kernels/batch_norm.h"
#include "host_kernels/convolution.h"
#include "host_kernels/layer_norm.h"
#include "host_kernels/matmul.h"
#include "runtime/host_heap.h"
#include "runtime/memory.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"
#include "runtime/xla_cpu_shortcuts.h"

namespace py = pybind11;

namespace tpu {

void register_cache_bindings(py::module& m);        // cache_bindings.cpp
void register_distributed_bindings(py::module& m);  // distributed_bindings.cpp
void register_kernel_bindings(py::module& m);       // kernel_bindings.cpp
void register_replay_bindings(py::module& m);       // replay_bindings.cpp
void register_target_bindings(py::module& m);       // target_bindings.cpp

namespace {

py::dict plugin_info() {
  runtime::Runtime& rt = runtime::Runtime::get();
  const pjrt::Plugin& plugin = rt.client().plugin();
  py::dict info;
  info["path"] = plugin.path();
  info["api_version"] =
      std::to_string(plugin.api_major()) + "." + std::to_string(plugin.api_minor());
  info["platform_name"] = rt.client().platform_name();
  info["platform_version"] = rt.client().platform_version();
  // Whether this process takes the CPU plugin's speed shortcuts (runtime/xla_cpu_shortcuts.h).
  info["xla_cpu_shortcuts"] = runtime::xla_cpu_shortcuts(rt.client().platform_name());
  py::dict attributes;
  for (const auto& [key, value] : plugin.attributes()) attributes[py::str(key)] = value;
  info["attributes"] = attributes;
  return info;
}

py::dict device_properties(int device) {
  aten::check_device_index(static_cast<c10::DeviceIndex>(device));
  pjrt::DeviceInfo info = runtime::Runtime::get().client().device_info(device);
  py::dict out;
  out["id"] = info.id;
  out["kind"] = info.kind;
  out["description"] = info.description;
  py::dict attributes;
  for (const auto& [name, values] : info.int_attributes) attributes[py::str(name)] = values;
  out["attributes"] = attributes;
  return out;
}

py::dict memory_stats(int device) {
  runtime::MemoryStats s = runtime::memory().stats(device);
  py::dict out;
  out["allocated_bytes.all.current"] = s.allocated;
  out["allocated_bytes.all.peak"] = s.peak;
  out["allocation.all.current"] = s.allocations;
  out["allocation.all.allocated"] = s.total_allocations;
  out["limit_bytes"] = s.limit;
  out["limit_source"] = s.limit_source;
  return out;
}

py::dict metrics_snapshot() {
  runtime::MetricsSnapshot s = runtime::metrics().snapshot();
  py::dict out;
  out["compiles"] = s.compiles;
  out["cache_hits"] = s.cache_hits;
  out["prepared_runs"] = s.prepared_runs;
  out["prepared_records"] = s.prepared_records;
  out["executions"] = s.executions;
  out["host_to_device"] = s.host_to_device;
  out["device_to_host"] = s.device_to_host;
  out["asynchronous_copies"] = s.asynchronous_copies;
  out["compile_seconds"] = s.compile_seconds;
  out["disk_hits"] = s.disk_hits;
  out["disk_misses"] = s.disk_misses;
  out["disk_writes"] = s.disk_writes;
  out["disk_evictions"] = s.disk_evictions;
  out["disk_corrupt"] = s.disk_corrupt;
  out["fused_graphs"] = s.fused_graphs;
  out["fused_ops"] = s.fused_ops;
  out["fused_reuses"] = s.fused_reuses;
  out["early_cuts"] = s.early_cuts;
  out["tier_ups"] = s.tier_ups;
  out["pinned_programs"] = s.pinned_programs;
  out["cpu_fallbacks"] = s.cpu_fallbacks;
  out["native_ops"] = s.native_ops;
  return out;
}

}  // namespace
}  // namespace tpu

PYBIND11_MODULE(_C, m) {
  using namespace tpu;
  aten::register_foreach_kernels();
  register_cache_bindings(m);
  register_distributed_bindings(m);
  register_kernel_bindings(m);
  register_replay_bindings(m);
  register_target_bindings(m);
  m.def(
      "_initialize",
      [](const std::string& path, const std::vector<pjrt::CreateOption>& options,
         std::optional<c10::intrusive_ptr<c10d::Store>> store, int node_id, int num_nodes,
         double timeout_s) {
        runtime::JobProcess job;
        if (store) job.key_values = std::make_shared<distributed::C10dKeyValueStore>(*store);
        job.node_id = node_id;
        job.num_nodes = num_nodes;
        job.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
        runtime::Runtime& rt = runtime::Runtime::initialize(path, options, std::move(job));
        if (runtime::xla_cpu_shortcuts(rt.client().platform_name()) &&
            host_kernels::install_host_matmul()) {
          host_kernels::install_host_attention();
          host_kernels::install_host_layer_norm();
          host_kernels::install_host_convolution();
          host_kernels::install_host_batch_norm();
        }
      },
      py::arg("plugin_path"), py::arg("options") = std::vector<pjrt::CreateOption>{},
      py::arg("store") = py::none(), py::arg("node_id") = 0, py::arg("num_nodes") = 1,
      py::arg("timeout_s") = 300.0, py::call_guard<py::gil_scoped_release>());
  m.def("_job_info", [] {
    const runtime::Runtime& rt = runtime::Runtime::get();
    py::dict info;
    info["node_id"] = rt.job().node_id;
    info["num_nodes"] = rt.job().num_nodes;
    info["multi_process"] = rt.job().is_multi_process();
    info["client_options"] = rt.client_options();
    return info;
  });
  m.def("_is_initialized", &runtime::Runtime::is_initialized);
  m.def("_host_heap_tuned", &runtime::host_heap_tuned);
  m.def("_host_matmul_installed", &host_kernels::host_matmul_installed);
  m.def("_host_matmul_enabled", &host_kernels::host_matmul_enabled);
  m.def("_set_host_matmul_enabled", &host_kernels::set_host_matmul_enabled);
  m.def("_host_matmul_split_products", &host_kernels::host_matmul_split_products);
  m.def("_plugin_info", &plugin_info);
  m.def("_device_count", [] { return static_cast<int>(aten::device_count()); });
  m.def("_current_device", [] { return static_cast<int>(aten::current_device()); });
  m.def("_spmd_safe", [] { return aten::spmd_safe(); });
  m.def("_set_spmd_safe", [](bool on) { aten::set_spmd_safe(on); });
  m.def("_set_process_device",
        [](int device) { aten::set_process_device(static_cast<c10::DeviceIndex>(device)); });
  m.def("_set_device",
        [](int device) { aten::set_current_device(static_cast<c10::DeviceIndex>(device)); });
  m.def("_device_properties", &device_properties);
  m.def("_synchronize", [] {
    py::gil_scoped_release no_gil;
    aten::translating_out_of_memory(aten::current_device(),
                                    [] { runtime::Runtime::get().synchronize(); });
  });
  m.def("_memory_stats", &memory_stats);
  m.def("_reset_peak_memory_stats", [](int device) { runtime::memory().reset_peak(device); });
  m.def("_set_memory_limit", [](int64_t bytes) { runtime::memory().set_limit(bytes); });
  m.def("_set_memory_capacity", [](int device, int64_t bytes, const std::string& source) {
    runtime::memory().set_capacity(device, bytes, source);
  });
  m.def("_metrics_snapshot", &metrics_snapshot);
  m.def("_metrics_reset", [] { runtime::metrics().reset(); });
  m.def("_compiled_program_count", [] { return runtime::Runtime::get().programs().size(); });
  // How many buffer references drop_retired_references let go of (for tests).
  m.def("_retired_references_dropped",
        [] { return runtime::Runtime::get().retired_references_dropped(); });
  m.def("_max_programs", [] { return runtime::Runtime::get().programs().max_programs(); });
  m.def("_set_max_programs",
        [](size_t count) { runtime::Runtime::get().programs().set_max_programs(count); });
  m.def("_set_fallback_mode",
        [](const std::string& mode) { aten::set_fallback_mode(aten::parse_fallback_mode(mode)); });
  // wait=false: torch.compile's graphs enter defer_and_fuse without draining the queue.
  m.def(
      "_set_eager_mode",
      [](const std::string& mode, bool wait) {
        aten::EagerMode parsed = aten::parse_eager_mode(mode);
        py::gil_scoped_release no_gil;
        if (wait) runtime::Runtime::get().synchronize();  // the old mode's work finishes first
        aten::set_eager_mode(parsed);
      },
      py::arg("mode"), py::arg("wait") = true);
  m.def("_get_eager_mode", [] { return aten::eager_mode_name(aten::eager_mode()); });
  // This thread's override (None: none); returns the previous one.
  m.def(
      "_set_thread_eager_mode",
      [](const std::optional<std::string>& mode) -> std::optional<std::string> {
        std::optional<aten::EagerMode> previous = aten::set_thread_eager_mode(
            mode ? std::optional<aten::EagerMode>(aten::parse_eager_mode(*mode)) : std::nullopt);
        if (!previous) return std::nullopt;
        return std::string(aten::eager_mode_name(*previous));
      },
      py::arg("mode"));
  m.def("_sync", [] {
    py::gil_scoped_release no_gil;
    aten::translating_out_of_memory(aten::current_device(), [] { aten::sync(); });
  });
  m.def("_get_fallback_mode", [] {
    switch (aten::fallback_mode()) {
      case aten::FallbackMode::Warn: return "warn";
      case aten::FallbackMode::Silent: return "silent";
      case aten::FallbackMode::Error: return "error";
    }
    return "warn";
  });
  m.def("_default_generator", [](int device) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(
        aten::default_generator(static_cast<c10::DeviceIndex>(device))));
  });
}
