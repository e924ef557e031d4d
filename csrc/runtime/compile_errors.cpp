#include "runtime/compile_errors.h"

#include <utility>
#include <vector>

namespace tpu::runtime {

namespace {
// The 64-bit element types `program` holds, as PyTorch names them.
std::string wide_types_in(const std::string& program) {
  static const std::vector<std::pair<std::string, std::string>> kTypes = {
      {"xf64>", "float64"}, {"complex<f64>", "complex128"}, {"xi64>", "int64"},
      {"xui64>", "uint64"}, {"<f64>", "float64"},           {"<i64>", "int64"},
  };
  std::string found;
  for (const auto& [mark, name] : kTypes) {
    if (program.find(mark) == std::string::npos) continue;
    if (found.find(name) != std::string::npos) continue;
    found += (found.empty() ? "" : ", ") + name;
  }
  return found;
}
}  // namespace

std::string explain_compile_error(const std::string& label, const std::string& platform,
                                  const std::string& program, const std::string& message) {
  const std::string what = label.empty() ? std::string("a program") : label;
  if (message.find("rewriting computation to not contain X64") != std::string::npos ||
      message.find("X64 rewriting") != std::string::npos) {
    const std::string types = wide_types_in(program);
    return what + " in " + (types.empty() ? std::string("64-bit types") : types) +
           " cannot be compiled for " + platform +
           ": its compiler emulates 64-bit values with 32-bit pairs and cannot do so for this "
           "op. Compute it in float32 (or int32) on " +
           platform + ", or on the CPU.\n" + message;
  }
  return what + ": " + message;
}

}  // namespace tpu::runtime
