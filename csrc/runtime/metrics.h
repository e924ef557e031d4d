#pragma once
// Process-wide counters behind torch_tpu.metrics.snapshot().
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace tpu::runtime {

struct MetricsSnapshot {
  int64_t compiles = 0;
  int64_t cache_hits = 0;
  int64_t executions = 0;
  int64_t host_to_device = 0;
  int64_t device_to_host = 0;
  double compile_seconds = 0;
  int64_t fused_graphs = 0;                      // defer_and_fuse graphs run
  int64_t fused_ops = 0;                         // ops recorded into them
  std::map<std::string, int64_t> cpu_fallbacks;  // operator name -> calls
  std::map<std::string, int64_t> native_ops;     // operator name -> calls
};

class Metrics {
 public:
  void count_compile(double seconds);
  void count_cache_hit();
  void count_execution();
  void count_fused_graph(int64_t ops);
  void count_host_to_device();
  void count_device_to_host();
  void count_fallback(const std::string& op);
  void count_native(const std::string& op);
  MetricsSnapshot snapshot();
  void reset();

 private:
  std::mutex mutex_;
  MetricsSnapshot data_;
};

Metrics& metrics();

}  // namespace tpu::runtime
