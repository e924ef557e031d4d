#include "kernels/stablehlo_call.h"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <set>

#include "aten/device.h"
#include "aten/dtype.h"
#include "aten/program.h"
#include "runtime/runtime.h"

namespace tpu::kernels {

namespace {

// Program keeps its op name as a C string for its whole life and metrics key on it:
// names of kernels are few, so they are kept for the process's life.
const char* interned(const std::string& name) {
  static std::mutex mutex;
  static std::set<std::string> names;
  std::lock_guard<std::mutex> lock(mutex);
  return names.insert(name).first->c_str();
}

c10::Device device_of(const std::vector<at::Tensor>& inputs) {
  for (const at::Tensor& input : inputs) {
    if (input.device().type() == c10::DeviceType::PrivateUse1) return input.device();
  }
  return c10::Device(c10::DeviceType::PrivateUse1, aten::current_device());
}

}  // namespace

hlo::ElementType kernel_element_type(c10::ScalarType dtype) {
  hlo::ElementType computed = aten::element_type(dtype);  // raises for an unsupported dtype
  return c10::isFloat8Type(dtype) ? aten::float8_type(dtype) : computed;
}

std::vector<at::Tensor> call_stablehlo(const std::string& op_name, const hlo::Callee& callee,
                                       const std::vector<at::Tensor>& inputs,
                                       const std::vector<c10::ScalarType>& input_types,
                                       const std::vector<CallOutput>& outputs) {
  TORCH_CHECK(inputs.size() == input_types.size(), op_name, ": ", inputs.size(), " inputs but ",
              input_types.size(), " input types");
  TORCH_CHECK(!outputs.empty(), op_name, ": a kernel must return at least one array");
  const c10::Device device = device_of(inputs);
  aten::Program program(interned(op_name));
  std::vector<hlo::Value> arguments;
  for (size_t i = 0; i < inputs.size(); ++i) {
    hlo::Value argument = program.read(inputs[i], input_types[i]);
    arguments.push_back(program.b().convert(argument, kernel_element_type(input_types[i])));
  }
  std::vector<hlo::TensorType> result_types;
  for (const CallOutput& output : outputs) {
    result_types.push_back(hlo::TensorType{kernel_element_type(output.dtype), output.sizes});
  }
  std::vector<hlo::Value> results = program.b().call(callee, arguments, result_types);

  std::vector<at::Tensor> tensors;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const CallOutput& output = outputs[i];
    at::Tensor tensor;
    if (output.donated_input >= 0) {
      TORCH_CHECK(static_cast<size_t>(output.donated_input) < inputs.size(), op_name,
                  ": donated input ", output.donated_input, " does not exist");
      tensor = inputs[output.donated_input];
      TORCH_CHECK(tensor.sizes().vec() == output.sizes && tensor.scalar_type() == output.dtype,
                  op_name, ": the result written into donated input ", output.donated_input,
                  " has shape ", c10::IntArrayRef(output.sizes), " and dtype ", output.dtype,
                  ", but the input has shape ", tensor.sizes(), " and dtype ",
                  tensor.scalar_type());
    } else {
      tensor = at::empty(output.sizes, at::TensorOptions().dtype(output.dtype).device(device));
    }
    program.write(tensor, results[i]);
    tensors.push_back(tensor);
  }
  program.run();
  return tensors;
}

void check_compiles(const std::string& op_name, const hlo::Callee& callee,
                    const std::vector<hlo::TensorType>& inputs,
                    const std::vector<hlo::TensorType>& outputs) {
  hlo::Builder b;
  std::vector<hlo::Value> arguments;
  for (const hlo::TensorType& type : inputs) arguments.push_back(b.parameter(type));
  std::vector<hlo::Value> results = b.call(callee, arguments, outputs);
  try {
    runtime::Runtime::get().programs().get(b.module_text(results), op_name,
                                           runtime::ProgramKind::Graph);
  } catch (const std::exception& e) {
    TORCH_CHECK(false, op_name, ": the kernel does not compile: ", e.what());
  }
}

}  // namespace tpu::kernels
