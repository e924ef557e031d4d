#pragma once
// The CPU fallback for operators without a native tpu lowering.
#include <string>

namespace tpu::aten {

enum class FallbackMode { Warn, Silent, Error };

// Initialised from TORCH_TPU_CPU_FALLBACK (warn | silent | error; default warn).
FallbackMode fallback_mode();
void set_fallback_mode(FallbackMode mode);
FallbackMode parse_fallback_mode(const std::string& text);  // throws c10::Error on bad text

}  // namespace tpu::aten
