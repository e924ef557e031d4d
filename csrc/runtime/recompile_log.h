#pragma once
// TORCH_TPU_LOG_RECOMPILES=1: one line on stderr for every real compile, naming the
// op or graph, why it compiled (a new op, new shapes/dtypes/layout, a new graph
// structure) and what differs from the nearest earlier program with the same label:
//
//   [torch_tpu] compile aten::add.Tensor: new shapes, dtypes or layout
//               (%arg0: tensor<3xf32> -> tensor<4xf32>) in 0.041 s
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tpu::runtime {

// Why `program` needed compiling, given the `earlier` programs with its label:
// "new op", "new shapes, dtypes or layout (...)" or "new graph structure (...)".
std::string explain_compile(const std::vector<std::string>& earlier, const std::string& program);

class RecompileLog {
 public:
  // Starts as TORCH_TPU_LOG_RECOMPILES says; tests and users may switch it.
  static bool enabled();
  static void set_enabled(bool on);

  // Explains a compile of `program` under `label` (an op or graph name; may be
  // empty) and remembers the program for later comparisons.
  std::string explain(const std::string& label, const std::string& program);
  // Prints one line to stderr, whole (lines of concurrent threads do not interleave).
  static void write(const std::string& line);

 private:
  static constexpr size_t kHistoryPerLabel = 32;
  std::mutex mutex_;
  std::unordered_map<std::string, std::deque<std::string>> history_;
};

}  // namespace tpu::runtime
