#pragma once
// How eager ops run. strict: each op is its own cached program, enqueued
// asynchronously. debug: each op is awaited before the next, so a failure surfaces
// at the op that caused it, named; with TORCH_TPU_DEBUG_NANS=1 the first op that
// produces a NaN or infinity is named too. defer_and_fuse: ops are recorded into a
// pending graph per device, run as one fused program at the next sync point.
#include <cstdint>
#include <optional>
#include <string>

namespace tpu::aten {

enum class EagerMode { Strict, Debug, DeferAndFuse };

// Initialised from TORCH_TPU_EAGER_MODE (strict | debug | defer_and_fuse), or
// TPU_LAUNCH_BLOCKING=1 (debug) or TPU_DEFER_AND_FUSE=1.
EagerMode eager_mode();
// Runs whatever is pending first, so switching mid-program is safe.
void set_eager_mode(EagerMode mode);
// This thread's mode while set, whatever the process-wide one: a compiled graph runs
// in defer_and_fuse without switching (and racing) the other threads' mode. Returns
// the previous override.
std::optional<EagerMode> set_thread_eager_mode(std::optional<EagerMode> mode);
EagerMode parse_eager_mode(const std::string& text);  // throws c10::Error for unknown modes
const char* eager_mode_name(EagerMode mode);
bool debug_nans();  // TORCH_TPU_DEBUG_NANS=1
// defer_and_fuse: a graph that reaches this many ops runs (TORCH_TPU_DEFER_MAX_OPS).
int64_t defer_max_ops();
// Runs every pending deferred graph (torch_tpu.sync()).
void sync();
// spmd_safe (this thread): the caller promises that every rank runs the same ops, so
// defer_and_fuse (and torch.compile) may fuse collectives into the graph around them.
// Off by default: each eager collective is then its own program, and ranks whose
// graphs differ can never deadlock inside one.
bool spmd_safe();
void set_spmd_safe(bool on);

}  // namespace tpu::aten
