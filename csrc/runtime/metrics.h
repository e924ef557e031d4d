#pragma once
// Process-wide counters behind torch_tpu.metrics.snapshot().
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace tpu::runtime {

struct MetricsSnapshot {
  int64_t compiles = 0;
  int64_t cache_hits = 0;
  int64_t executions = 0;
  int64_t host_to_device = 0;
  int64_t device_to_host = 0;
  // Of those, the non_blocking copies that returned before the data moved (pinned memory).
  int64_t asynchronous_copies = 0;
  double compile_seconds = 0;
  int64_t fused_graphs = 0;      // defer_and_fuse graphs run
  int64_t fused_ops = 0;         // ops recorded into them
  int64_t fused_reuses = 0;      // graphs that reused an equal earlier graph's executable
  int64_t early_cuts = 0;        // graphs run early, after a host wait (see DeferredGraph)
  int64_t tier_ups = 0;          // quickly compiled ops replaced by optimized ones (ProgramKind)
  int64_t pinned_programs = 0;   // hot op programs loaded again for their one device (pin())
  int64_t prepared_runs = 0;     // strict calls that ran a prepared program (no lowering)
  int64_t prepared_records = 0;  // defer_and_fuse calls recorded without lowering
  // The disk cache (compiles counts real XLA compiles only; a disk hit is not one).
  int64_t disk_hits = 0;       // executables loaded from disk
  int64_t disk_misses = 0;     // no entry on disk
  int64_t disk_writes = 0;     // entries written
  int64_t disk_evictions = 0;  // entries deleted to stay under the size cap
  int64_t disk_corrupt = 0;    // entries rejected: truncated, corrupt, foreign, unloadable
  std::map<std::string, int64_t> cpu_fallbacks;  // operator name -> calls
  // operator name -> calls (transparent: counted by name without making a string)
  std::map<std::string, int64_t, std::less<>> native_ops;
};

// Totals that say whether anything ran or moved between two moments (cheap to take).
struct Activity {
  int64_t executions = 0;
  int64_t transfers = 0;  // host to device and device to host
  int64_t fallbacks = 0;
};

enum class DiskEvent { Hit, Miss, Write, Eviction, Corrupt };

class Metrics {
 public:
  void count_compile(double seconds);
  void count_cache_hit();
  void count_fused_reuse();
  void count_early_cut();
  void count_tier_up();
  void count_pinned_program();
  void count_disk(DiskEvent event);
  void count_execution();
  void count_fused_graph(int64_t ops);
  void count_host_to_device();
  void count_device_to_host();
  void count_asynchronous_copy();
  void count_fallback(const std::string& op);
  void count_native(const std::string& op);
  // One prepared op's run (prepared_op.h): an execution, a program reused (a cache hit),
  // a native call of `op` and a prepared run, under one lock.
  void count_prepared_run(const char* op);
  void count_prepared_record(const char* op);
  MetricsSnapshot snapshot();
  Activity activity();
  void reset();

 private:
  void count_native_locked(const char* op);  // holds mutex_
  std::mutex mutex_;
  MetricsSnapshot data_;
  int64_t fallbacks_ = 0;  // all of data_.cpu_fallbacks
};

Metrics& metrics();

}  // namespace tpu::runtime
