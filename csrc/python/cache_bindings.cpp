// torch_tpu._C entry points of the compile cache: configuring the disk cache, its
// statistics, clearing, and the recompile log switch (torch_tpu/cache.py wraps them).
#include <torch/csrc/utils/pybind.h>

#include "aten/prepared_op.h"
#include "runtime/cache_identity.h"
#include "runtime/disk_cache.h"
#include "runtime/recompile_log.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace tpu {
namespace {

// An empty `directory` turns the disk cache off.
void configure(const std::string& directory, int64_t max_bytes, const std::string& version) {
  runtime::Runtime& rt = runtime::Runtime::get();
  if (directory.empty()) {
    rt.programs().set_disk_cache(nullptr);
    return;
  }
  rt.programs().set_disk_cache(std::make_shared<runtime::DiskCache>(
      directory, max_bytes, runtime::cache_identity(rt.client(), version)));
}

py::tuple settings_from_environment() {
  runtime::DiskCacheSettings settings = runtime::DiskCacheSettings::from_environment();
  return py::make_tuple(settings.directory, settings.max_bytes);
}

py::dict info() {
  std::shared_ptr<runtime::DiskCache> disk = runtime::Runtime::get().programs().disk_cache();
  py::dict out;
  out["directory"] = disk ? py::object(py::str(disk->directory())) : py::none();
  out["max_bytes"] = disk ? disk->max_bytes() : 0;
  runtime::DiskUsage usage;
  if (disk) {
    py::gil_scoped_release no_gil;
    usage = disk->usage();
  }
  out["entries"] = usage.entries;
  out["bytes"] = usage.bytes;
  return out;
}

void clear() {
  runtime::ProgramCache& programs = runtime::Runtime::get().programs();
  programs.clear();
  if (std::shared_ptr<runtime::DiskCache> disk = programs.disk_cache()) disk->clear();
}

}  // namespace

void register_cache_bindings(py::module& m) {
  m.def("_cache_configure", &configure, py::arg("directory"), py::arg("max_bytes"),
        py::arg("version"));
  m.def("_cache_settings_from_environment", &settings_from_environment);
  m.def("_cache_info", &info);
  m.def("_cache_clear", &clear);
  m.def("_cache_clear_memory", [] {
    aten::clear_prepared_ops();
    runtime::Runtime::get().programs().clear();
  });
  m.def("_set_log_recompiles", &runtime::RecompileLog::set_enabled);
  m.def("_get_log_recompiles", &runtime::RecompileLog::enabled);
}

}  // namespace tpu
