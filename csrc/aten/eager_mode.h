#pragma once
// How eager ops run. strict: each op is its own cached program, enqueued
// asynchronously. debug: each op is awaited before the next, so a failure surfaces
// at the op that caused it, named; with TORCH_TPU_DEBUG_NANS=1 the first op that
// produces a NaN or infinity is named too.
#include <string>

namespace tpu::aten {

enum class EagerMode { Strict, Debug };

// Initialised from TORCH_TPU_EAGER_MODE (strict | debug) or TPU_LAUNCH_BLOCKING=1.
EagerMode eager_mode();
void set_eager_mode(EagerMode mode);
EagerMode parse_eager_mode(const std::string& text);  // throws c10::Error for unknown modes
const char* eager_mode_name(EagerMode mode);
bool debug_nans();  // TORCH_TPU_DEBUG_NANS=1

}  // namespace tpu::aten
