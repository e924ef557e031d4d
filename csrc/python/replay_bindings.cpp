// torch_tpu._C._GraphReplay: the record-once, replay plans of one compiled graph
// (torch_tpu/dynamo.py calls run() first, and begin()/finish() around a recorded call).
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "aten/graph_replay.h"

namespace py = pybind11;

namespace tpu {

namespace {

// A Python float that Dynamo passes as a 0-d float64 CPU tensor (with dynamic=True it does
// not bake floats into the graph: an epsilon, a scaling factor). The graph reads it on the
// host (.item()) and the recorded program takes it as a host operand, so a plan applies
// only where its value repeats: it is a constant, by its bits. (An optimizer's step count
// is a float32 CPU tensor that changes every step: still a reason not to replay.)
bool is_unspecialized_float(const at::Tensor& t) {
  return t.device().is_cpu() && t.dim() == 0 && t.scalar_type() == c10::kDouble &&
         !t.requires_grad();
}

std::string bits_of(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(bits));
  return "float64:" + std::to_string(bits);
}

// The call's arguments as the core sees them; false if one is a value whose equality
// cannot be told from its text (only tensors, None, bools, ints and floats can).
bool to_arguments(const py::list& args, std::vector<aten::GraphArgument>* out) {
  out->resize(args.size());
  bool replayable = true;
  for (size_t i = 0; i < args.size(); ++i) {
    PyObject* arg = args[i].ptr();
    aten::GraphArgument& a = (*out)[i];
    if (THPVariable_Check(arg)) {
      const at::Tensor& tensor = THPVariable_Unpack(arg);
      if (is_unspecialized_float(tensor)) {
        a.constant = bits_of(*tensor.const_data_ptr<double>());
      } else {
        a.tensor = tensor;
      }
    } else if (arg == Py_None || PyBool_Check(arg) || PyLong_CheckExact(arg) ||
               PyFloat_CheckExact(arg)) {
      a.constant = std::string(Py_TYPE(arg)->tp_name) + ":" + py::repr(args[i]).cast<std::string>();
    } else {
      replayable = false;
    }
  }
  return replayable;
}

struct CompiledGraph {
  explicit CompiledGraph(std::string label) : core(std::move(label)) {}
  aten::GraphReplay core;
  // Per plan: the outputs that are not tensors (None where the output is a tensor),
  // and whether the graph returned a tuple.
  std::vector<std::vector<py::object>> constants;
  std::vector<bool> tuple;
};

}  // namespace

void register_replay_bindings(py::module& m) {
  py::class_<CompiledGraph>(m, "_GraphReplay")
      .def(py::init<std::string>(), py::arg("label"))
      // The outputs of a replayed plan for `args`, or None (record the call instead).
      .def("run",
           [](CompiledGraph& self, const py::list& args) -> py::object {
             std::vector<aten::GraphArgument> arguments;
             if (self.constants.empty() || !to_arguments(args, &arguments)) return py::none();
             int plan = -1;
             std::optional<std::vector<at::Tensor>> outputs;
             {
               py::gil_scoped_release no_gil;
               outputs = self.core.run(arguments, &plan);
             }
             if (!outputs) return py::none();
             py::list result;
             for (size_t j = 0; j < outputs->size(); ++j) {
               if ((*outputs)[j].defined()) {
                 result.append(
                     py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move((*outputs)[j]))));
               } else {
                 result.append(self.constants[plan][j]);
               }
             }
             if (self.tuple[plan]) return py::tuple(result);
             return std::move(result);
           })
      .def("begin",
           [](CompiledGraph& self, const py::list& args) {
             std::vector<aten::GraphArgument> arguments;
             if (!to_arguments(args, &arguments)) return;
             py::gil_scoped_release no_gil;
             self.core.begin(arguments);
           })
      // Keeps a plan if the call just recorded can be replayed; returns why not, or "".
      // `outputs` None: the call raised.
      .def("finish",
           [](CompiledGraph& self, const py::list& args, const py::object& outputs) -> std::string {
             std::vector<aten::GraphArgument> arguments;
             if (outputs.is_none()) {
               self.core.abandon();
               return "the call raised";
             }
             bool replayable = to_arguments(args, &arguments);
             bool sequence =
                 py::isinstance<py::tuple>(outputs) || py::isinstance<py::list>(outputs);
             if (!replayable || !sequence) {
               self.core.abandon();
               return replayable ? "it returns something other than a list or tuple"
                                 : "an argument is neither a tensor nor a number";
             }
             std::vector<at::Tensor> tensors;
             std::vector<py::object> constants;
             for (const py::handle& out : outputs) {
               if (THPVariable_Check(out.ptr())) {
                 tensors.push_back(THPVariable_Unpack(out.ptr()));
                 constants.push_back(py::none());
               } else {
                 tensors.emplace_back();
                 constants.push_back(py::reinterpret_borrow<py::object>(out));
               }
             }
             std::string why;
             int plan = self.core.finish(arguments, tensors, &why);
             if (plan < 0) return why;
             self.constants.resize(plan + 1);
             self.tuple.resize(plan + 1);
             self.constants[plan] = std::move(constants);
             self.tuple[plan] = py::isinstance<py::tuple>(outputs);
             return "";
           })
      .def_property_readonly("plans", [](CompiledGraph& self) { return self.core.plans(); })
      .def_property_readonly("label", [](const CompiledGraph& self) { return self.core.label(); });
}

}  // namespace tpu
