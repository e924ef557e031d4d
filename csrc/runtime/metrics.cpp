#include "runtime/metrics.h"

namespace tpu::runtime {

Metrics& metrics() {
  static Metrics instance;
  return instance;
}

void Metrics::count_compile(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.compiles += 1;
  data_.compile_seconds += seconds;
}

void Metrics::count_cache_hit() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.cache_hits += 1;
}

void Metrics::count_tier_up() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.tier_ups += 1;
}

void Metrics::count_pinned_program() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.pinned_programs += 1;
}

void Metrics::count_fused_reuse() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.cache_hits += 1;
  data_.fused_reuses += 1;
}

void Metrics::count_early_cut() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.early_cuts += 1;
}

void Metrics::count_disk(DiskEvent event) {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (event) {
    case DiskEvent::Hit: data_.disk_hits += 1; break;
    case DiskEvent::Miss: data_.disk_misses += 1; break;
    case DiskEvent::Write: data_.disk_writes += 1; break;
    case DiskEvent::Eviction: data_.disk_evictions += 1; break;
    case DiskEvent::Corrupt: data_.disk_corrupt += 1; break;
  }
}

void Metrics::count_execution() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.executions += 1;
}

void Metrics::count_fused_graph(int64_t ops) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.fused_graphs += 1;
  data_.fused_ops += ops;
}

void Metrics::count_host_to_device() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.host_to_device += 1;
}

void Metrics::count_device_to_host() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.device_to_host += 1;
}

void Metrics::count_asynchronous_copy() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.asynchronous_copies += 1;
}

void Metrics::count_fallback(const std::string& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.cpu_fallbacks[op] += 1;
  fallbacks_ += 1;
}

void Metrics::count_native_locked(const char* op) {
  // Found by view: no string is made for an operator already counted.
  auto it = data_.native_ops.find(std::string_view(op));
  if (it == data_.native_ops.end()) it = data_.native_ops.emplace(op, 0).first;
  it->second += 1;
}

void Metrics::count_prepared_run(const char* op) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.executions += 1;
  data_.cache_hits += 1;
  data_.prepared_runs += 1;
  count_native_locked(op);
}

void Metrics::count_prepared_record(const char* op) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.prepared_records += 1;
  count_native_locked(op);
}

void Metrics::count_native(const std::string& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  data_.native_ops[op] += 1;
}

MetricsSnapshot Metrics::snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  return data_;
}

Activity Metrics::activity() {
  std::lock_guard<std::mutex> lock(mutex_);
  return Activity{data_.executions, data_.host_to_device + data_.device_to_host, fallbacks_};
}

void Metrics::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  data_ = MetricsSnapshot{};
  fallbacks_ = 0;
}

}  // namespace tpu::runtime
