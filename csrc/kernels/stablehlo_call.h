#pragma once
// Runs a StableHLO function that torch_tpu did not lower itself (a JAX function or a
// Pallas kernel, lowered by JAX) on tpu tensors, inside torch_tpu's own programs: in
// strict mode as the op's program, in defer_and_fuse and torch.compile as a call in the
// fused graph. Inputs are read through their views (any strides, offsets), so the
// function always sees dense arrays; outputs are new tensors, or written in place into
// a donated input.
#include <ATen/core/Tensor.h>

#include <vector>

#include "hlo/builder.h"

namespace tpu::kernels {

struct CallOutput {
  std::vector<int64_t> sizes;
  c10::ScalarType dtype = c10::kFloat;
  int donated_input = -1;  // the input this result is written into, or -1 for a new tensor
};

// `callee` returns one value per entry of `outputs`, and takes one per input, of the
// input's shape and of `input_types[i]` (inputs are converted to it). `op_name` names
// the op in metrics, profiles and errors. Returns one tensor per output (the donated
// input itself, for a donated output).
std::vector<at::Tensor> call_stablehlo(const std::string& op_name, const hlo::Callee& callee,
                                       const std::vector<at::Tensor>& inputs,
                                       const std::vector<c10::ScalarType>& input_types,
                                       const std::vector<CallOutput>& outputs);

// The element type a kernel's own StableHLO uses for `dtype`: an 8-bit float as itself (on
// tpu it is computed in float32, see aten::element_type), any other dtype its element_type.
hlo::ElementType kernel_element_type(c10::ScalarType dtype);

// Compiles `callee` alone, once per signature, raising an error that names `op_name` if the
// plugin refuses it. A deferred graph compiles its ops only when it runs, where a kernel's
// compile error would surface at some later, unrelated read, without its name.
void check_compiles(const std::string& op_name, const hlo::Callee& callee,
                    const std::vector<hlo::TensorType>& inputs,
                    const std::vector<hlo::TensorType>& outputs);

}  // namespace tpu::kernels
