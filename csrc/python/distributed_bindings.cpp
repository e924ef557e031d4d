// torch_tpu._C._distributed: builds the c10d backend of torch_tpu from a gloo backend
// that Python made (torch ships no gloo headers, so C++ cannot make one).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include <chrono>
#include <memory>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include "distributed/host_staging_engine.h"
#include "distributed/tpu_backend.h"
#include "distributed/xla_collective_engine.h"

namespace py = pybind11;

namespace tpu {

void register_distributed_bindings(py::module& m) {
  py::module d = m.def_submodule("_distributed", "torch_tpu's c10d backend");
  d.def(
      "create_backend",
      [](c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size, bool check_agreement,
         std::vector<int64_t> xla_device_ids, int device) -> c10::intrusive_ptr<c10d::Backend> {
        std::unique_ptr<distributed::CollectiveEngine> engine =
            std::make_unique<distributed::HostStagingEngine>(gloo, rank, size);
        // With the group's device ids, tpu tensors take XLA collectives; the gloo engine
        // stays for cpu tensors and what has no XLA collective.
        if (!xla_device_ids.empty()) {
          engine = std::make_unique<distributed::XlaCollectiveEngine>(
              std::move(engine), rank, size, device, std::move(xla_device_ids));
        }
        return c10::make_intrusive<distributed::TpuBackend>(std::move(engine), rank, size,
                                                            check_agreement);
      },
      py::arg("gloo"), py::arg("rank"), py::arg("size"), py::arg("check_agreement") = true,
      py::arg("xla_device_ids") = std::vector<int64_t>{}, py::arg("device") = -1,
      py::call_guard<py::gil_scoped_release>());
  d.def("engine_name", [](const c10::intrusive_ptr<c10d::Backend>& backend) -> std::string {
    auto* tpu_backend = dynamic_cast<distributed::TpuBackend*>(backend.get());
    TORCH_CHECK_VALUE(tpu_backend != nullptr,
                      "not a torch_tpu backend: ", backend->getBackendName());
    return tpu_backend->engine().name();
  });
  // c10d binds setTimeout for gloo and NCCL only; this reaches any backend's.
  d.def(
      "set_timeout",
      [](const c10::intrusive_ptr<c10d::Backend>& backend, std::chrono::milliseconds timeout) {
        backend->setTimeout(timeout);
      },
      py::arg("backend"), py::arg("timeout"));
}

}  // namespace tpu
