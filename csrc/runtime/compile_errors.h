#pragma once
// A compiler's refusal, said so that a user knows what to change: which op or graph, which of
// its types the compiler of which platform cannot handle, and what to do instead. Used where
// the runtime compiles (ProgramCache) and where programs are checked for targets.
#include <string>

namespace tpu::runtime {

// `message` (the plugin's error) prefixed with `label`, and, for a refusal with a known cause,
// a first line naming the op, its types, `platform` and the way around it.
std::string explain_compile_error(const std::string& label, const std::string& platform,
                                  const std::string& program, const std::string& message);

}  // namespace tpu::runtime
