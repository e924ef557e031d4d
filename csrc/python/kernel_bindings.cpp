// torch_tpu._C._kernels: runs StableHLO functions lowered by JAX on tpu tensors
// (torch_tpu/kernels wraps it as torch.library custom ops).
#include <torch/csrc/utils/pybind.h>

#include "aten/dtype.h"
#include "kernels/stablehlo_call.h"

namespace py = pybind11;

namespace tpu {

void register_kernel_bindings(py::module& m) {
  py::module k = m.def_submodule("_kernels", "StableHLO functions as tpu ops");
  // One lowered module, kept by Python per input signature so that a call does not
  // copy the text: `text` holds func.func definitions, `name` the one to call.
  py::class_<hlo::Callee>(k, "Callee")
      .def(py::init([](std::string name, std::string text) {
             return hlo::Callee{std::move(name),
                                std::make_shared<const std::string>(std::move(text))};
           }),
           py::arg("name"), py::arg("text"))
      .def_readonly("name", &hlo::Callee::name)
      .def_property_readonly("text", [](const hlo::Callee& c) { return *c.text; });
  // outputs: (sizes, dtype, donated input index or -1) per result.
  k.def(
      "call",
      [](const std::string& op_name, const hlo::Callee& callee,
         const std::vector<at::Tensor>& inputs, const std::vector<c10::ScalarType>& input_types,
         const std::vector<std::tuple<std::vector<int64_t>, c10::ScalarType, int>>& outputs) {
        std::vector<kernels::CallOutput> specs;
        for (const auto& [sizes, dtype, donated] : outputs)
          specs.push_back({sizes, dtype, donated});
        return kernels::call_stablehlo(op_name, callee, inputs, input_types, specs);
      },
      py::arg("op_name"), py::arg("callee"), py::arg("inputs"), py::arg("input_types"),
      py::arg("outputs"));
  // inputs, outputs: (sizes, dtype) of the callee's parameters and results.
  k.def(
      "check_compiles",
      [](const std::string& op_name, const hlo::Callee& callee,
         const std::vector<std::pair<std::vector<int64_t>, c10::ScalarType>>& inputs,
         const std::vector<std::pair<std::vector<int64_t>, c10::ScalarType>>& outputs) {
        auto types = [](const auto& specs) {
          std::vector<hlo::TensorType> out;
          for (const auto& [sizes, dtype] : specs)
            out.push_back(hlo::TensorType{kernels::kernel_element_type(dtype), sizes});
          return out;
        };
        kernels::check_compiles(op_name, callee, types(inputs), types(outputs));
      },
      py::arg("op_name"), py::arg("callee"), py::arg("inputs"), py::arg("outputs"));
}

}  // namespace tpu
