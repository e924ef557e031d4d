#pragma once
// The CPU fallback for operators without a native tpu lowering.
#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace tpu::aten {

enum class FallbackMode { Warn, Silent, Error };

// Initialised from TORCH_TPU_CPU_FALLBACK (warn | silent | error; default warn).
FallbackMode fallback_mode();
void set_fallback_mode(FallbackMode mode);
FallbackMode parse_fallback_mode(const std::string& text);  // throws c10::Error on bad text

// Runs `op` on the CPU (arguments copied to the host, results and mutated arguments back),
// counted in the metrics and warned about once per operator; refused under mode Error.
void tpu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The same for sparse tpu tensors (dispatch key SparsePrivateUse1): the host runs SparseCPU's
// kernel.
void tpu_sparse_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The same for quantized tpu tensors (dispatch key QuantizedPrivateUse1): the host runs
// QuantizedCPU's kernel.
void tpu_quantized_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace tpu::aten
