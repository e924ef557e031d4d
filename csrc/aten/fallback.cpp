// Runs an operator that has no tpu lowering on the CPU through PyTorch's boxed
// fallback (inputs copied to the host, outputs and mutated inputs copied back),
// counting each call and warning once per operator.
#include "aten/fallback.h"

#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <mutex>
#include <set>

#include "runtime/metrics.h"

namespace tpu::aten {

namespace {

std::mutex mutex;
std::optional<FallbackMode> mode;
std::set<std::string> warned;

std::string full_name(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  std::string name = full_name(op);
  FallbackMode current = fallback_mode();
  TORCH_CHECK_NOT_IMPLEMENTED(current != FallbackMode::Error, "The operator '", name,
                              "' has no native tpu lowering, and TORCH_TPU_CPU_FALLBACK=error "
                              "forbids running it on the CPU. Set TORCH_TPU_CPU_FALLBACK=warn "
                              "to let it fall back.");
  runtime::metrics().count_fallback(name);
  if (current == FallbackMode::Warn) {
    bool first;
    {
      std::lock_guard<std::mutex> lock(mutex);
      first = warned.insert(name).second;
    }
    if (first) {
      TORCH_WARN("The operator '", name,
                 "' has no native tpu lowering yet; it runs on the CPU instead (inputs copied "
                 "to the host and results back), which is slow. This warning is shown once per "
                 "operator; TORCH_TPU_CPU_FALLBACK=silent hides it, =error forbids fallbacks.");
    }
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/true, cpu_key);
}

}  // namespace

void tpu_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_cpu(op, stack, c10::DispatchKey::CPU);
}

void tpu_sparse_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // Whatever reaches the sparse key has a sparse argument: on the host it is SparseCPU's.
  run_on_cpu(op, stack, c10::DispatchKey::SparseCPU);
}

void tpu_quantized_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  run_on_cpu(op, stack, c10::DispatchKey::QuantizedCPU);
}

FallbackMode parse_fallback_mode(const std::string& text) {
  if (text == "warn" || text.empty()) return FallbackMode::Warn;
  if (text == "silent") return FallbackMode::Silent;
  if (text == "error") return FallbackMode::Error;
  TORCH_CHECK(false, "TORCH_TPU_CPU_FALLBACK must be warn, silent or error, got '", text, "'");
}

FallbackMode fallback_mode() {
  std::lock_guard<std::mutex> lock(mutex);
  if (!mode.has_value()) {
    const char* text = std::getenv("TORCH_TPU_CPU_FALLBACK");
    mode = parse_fallback_mode(text != nullptr ? text : "");
  }
  return *mode;
}

void set_fallback_mode(FallbackMode value) {
  std::lock_guard<std::mutex> lock(mutex);
  mode = value;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_cpu_fallback>());
}

}  // namespace tpu::aten
