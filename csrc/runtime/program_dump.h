#pragma once
// TORCH_TPU_DUMP_PROGRAMS=dir: every program a process loads (compiled or read from the
// disk cache) is written to dir/<n>-<label>.mlir, the StableHLO text it was keyed by, so
// a user can see exactly what ran (and a test can check what a lowering emitted).
#include <string>

namespace tpu::runtime {

// Writes `program` if the variable names a directory and returns the file's path (empty
// where nothing was written); never throws (dumping is a diagnostic: a full disk must not
// stop the program).
std::string dump_program(const std::string& program, const std::string& label);

}  // namespace tpu::runtime
