#include "runtime/target_check.h"

#include <chrono>
#include <exception>

#include "pjrt/compile_options.h"
#include "runtime/compile_errors.h"
#include "runtime/fingerprint.h"
#include "runtime/program_cache.h"

namespace tpu::runtime {

namespace {

// The options the runtime on `target`'s platform compiles `job` with: portable for a
// one-device program, otherwise replicated over the target's first devices (the program
// of a collective). Empty, with `why` set, where the target has too few devices.
std::string options_on_target(const TargetSpec& target, int64_t replicas, std::string* why) {
  if (replicas <= 1) return compile_options_for(target.topology->platform_name(), ProgramKind::Op);
  const auto& devices = target.topology->devices();
  if (static_cast<int64_t>(devices.size()) < replicas) {
    *why = "the program spans " + std::to_string(replicas) + " devices; " + target.name + " has " +
           std::to_string(devices.size());
    return "";
  }
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < replicas; ++i) ids.push_back(devices[i].id);
  return pjrt::replicated_compile_options(ids);
}

// The XLA:CPU host kernel `program` calls (csrc/host_kernels: a CPU-only shortcut no TPU or
// GPU compiler knows), or empty.
std::string host_kernel_called(const std::string& program) {
  static const std::string kMark = "call_target_name = \"torch_tpu.host_";
  const size_t at = program.find(kMark);
  if (at == std::string::npos) return "";
  const size_t start = at + kMark.size() - std::string("torch_tpu.host_").size();
  return program.substr(start, program.find('"', start) - start);
}

}  // namespace

TargetCheck::~TargetCheck() { set_targets({}); }

void TargetCheck::set_targets(std::vector<TargetSpec> targets) {
  std::lock_guard<std::mutex> control(control_);
  std::thread stopped;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stopping_ = true;
    stopped = std::move(worker_);
    changed_.notify_all();
  }
  if (stopped.joinable()) stopped.join();
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = false;
  targets_ = std::move(targets);
  queue_.clear();
  busy_ = false;
  seen_.clear();
  results_.clear();
  active_.store(!targets_.empty());
  if (!targets_.empty()) worker_ = std::thread([this] { run(); });
  changed_.notify_all();  // a results() waiting on the old queue returns
}

void TargetCheck::submit(const std::string& program, const std::string& label,
                         const std::string& compile_options, const std::string& dump_path) {
  if (!active()) return;
  try {
    // The program and how many devices it spans: the local run's CPU-only option overrides
    // (quick, op, graph) change nothing a target compiles.
    std::string hash = fnv1a_128_hex(
        program + "\n// replicas: " + std::to_string(pjrt::replica_count(compile_options)));
    std::lock_guard<std::mutex> lock(mutex_);
    auto [seen, added] = seen_.try_emplace(hash, 0);
    ++seen->second;
    if (!added) return;
    queue_.push_back(Job{program, label, compile_options, dump_path, std::move(hash)});
    changed_.notify_all();
  } catch (const std::exception&) {
    // Checking is a diagnostic: running out of memory for the queue must not stop the run.
  }
}

size_t TargetCheck::pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size() + (busy_ ? 1 : 0);
}

std::vector<TargetResult> TargetCheck::results() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock,
                [this] { return (queue_.empty() && !busy_) || !worker_.joinable() || stopping_; });
  std::vector<TargetResult> results = results_;
  for (TargetResult& result : results) result.uses = seen_[result.program_hash];
  return results;
}

void TargetCheck::run() {
  for (;;) {
    Job job;
    std::vector<TargetSpec> targets;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      targets = targets_;
    }
    for (const TargetSpec& target : targets) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) break;
      }
      try {
        check(job, target);
      } catch (const std::exception& error) {
        // Checking is a diagnostic: a failure of ours is one more result, not the process's end.
        TargetResult failed;
        failed.target = target.name;
        failed.label = job.label;
        failed.program_hash = job.hash;
        failed.error = std::string("the check itself failed: ") + error.what();
        std::lock_guard<std::mutex> lock(mutex_);
        results_.push_back(std::move(failed));
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    busy_ = false;
    changed_.notify_all();
  }
}

void TargetCheck::check(const Job& job, const TargetSpec& target) {
  TargetResult result;
  result.target = target.name;
  result.label = job.label;
  result.dump_path = job.dump_path;
  result.program_hash = job.hash;
  result.replicas = pjrt::replica_count(job.compile_options);
  std::string options = options_on_target(target, result.replicas, &result.error);
  const std::string host_kernel = host_kernel_called(job.program);
  if (!host_kernel.empty()) {
    result.error = "the program calls the XLA:CPU host kernel " + host_kernel +
                   " (a CPU-platform shortcut no TPU or GPU has): check with "
                   "TORCH_TPU_XLA_CPU_SHORTCUTS=0, the programs an accelerator runs";
    options.clear();
  }
  if (!options.empty()) {
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<pjrt::CompiledProgram> compiled;
    try {
      compiled = target.topology->compile(job.program, options + target.extra_options);
    } catch (const std::exception& error) {
      result.error = explain_compile_error(job.label, target.name, job.program, error.what());
    }
    if (compiled == nullptr && !target.fallback_options.empty()) {
      try {
        compiled = target.topology->compile(
            job.program, options + target.extra_options + target.fallback_options);
        const std::string first = result.error.substr(0, result.error.find('\n'));
        result.note = "compiled with " + target.fallback_name + " after: " + first;
        result.error.clear();
      } catch (const std::exception&) {
        // Refused either way: the first message says why.
      }
    }
    if (compiled != nullptr) {
      try {
        result.compiled = true;
        result.memory = compiled->memory();
        result.costs = compiled->cost_analysis();
        if (target.warm_cache != nullptr) {
          // The key the runtime on the target's platform looks the program up by.
          const std::string key =
              result.replicas <= 1 ? job.program : key_with_options(job.program, options);
          target.warm_cache->store(key, compiled->serialize());
        }
      } catch (const std::exception& error) {
        result.compiled = false;
        result.error = job.label + ": " + error.what();
      }
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  results_.push_back(std::move(result));
}

TargetCheck& target_check() {
  // Never destroyed: the worker may still hold plugin objects at exit, and plugins are
  // never unloaded; set_targets({}) stops it where a clean stop matters.
  static TargetCheck* check = new TargetCheck();
  return *check;
}

}  // namespace tpu::runtime
