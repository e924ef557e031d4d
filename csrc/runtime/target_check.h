#pragma once
// Compiling every program this process compiles also for compile-only targets
// (TORCH_TPU_ALSO_COMPILE_FOR=v6e:1x1,h100; torch_tpu.targets): does each program compile
// for a TPU v6e or an H100, what memory does it need there, how many flops and bytes. The
// local run is unchanged: ProgramCache hands each program it loads to submit(), which
// queues it; one worker thread compiles the queue for every target, once per distinct
// program text and options, off the op's path.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pjrt/topology.h"
#include "runtime/disk_cache.h"

namespace tpu::runtime {

struct TargetSpec {
  std::string name;  // as the user wrote it: "v6e:1x1", "h100"
  std::shared_ptr<const pjrt::Topology> topology;
  // Serialized xla.CompileOptionsProto overrides every compile for this target adds (e.g. the
  // GPU compiler's ptxas folder): appended to the portable or replicated options.
  std::string extra_options;
  // Overrides to compile with once more where the first compile fails, and what they are
  // ("cuBLAS GEMMs"), for a compiler that would choose among variants on the device (the GPU
  // compiler autotunes its Triton GEMM tilings there; without a GPU it tries only its
  // default one, which some shapes refuse). Empty: no second try.
  std::string fallback_options;
  std::string fallback_name;
  // Where to store each compiled program's serialized executable, under the key the
  // runtime on the target's platform looks up (target_check --warm-cache); null: nowhere.
  std::shared_ptr<DiskCache> warm_cache;
};

// One program compiled (or refused) for one target.
struct TargetResult {
  std::string target;
  std::string label;      // the op or graph name ProgramCache was given
  std::string dump_path;  // where TORCH_TPU_DUMP_PROGRAMS wrote it; empty if not dumped
  std::string program_hash;
  int64_t replicas = 1;  // devices the program spans (collectives: the group's size)
  bool compiled = false;
  std::string error;  // the compiler's (or our) reason, where refused
  std::string note;   // compiled with the target's fallback options: why
  std::optional<pjrt::CompiledMemory> memory;
  std::map<std::string, double> costs;  // cost analysis (TPU)
  double seconds = 0;                   // compile time
  int64_t uses = 1;  // how often the process loaded this program (a rough run count)
};

class TargetCheck {
 public:
  ~TargetCheck();
  // Starts checking for `targets` (replacing any earlier ones; an empty list stops).
  void set_targets(std::vector<TargetSpec> targets);
  bool active() const { return active_.load(std::memory_order_relaxed); }

  // Queues `program` (compiled locally with `compile_options`) for every target; a program
  // already queued or checked only counts one more use. Never throws, never blocks on a
  // compile.
  void submit(const std::string& program, const std::string& label,
              const std::string& compile_options, const std::string& dump_path);
  // Waits until the queue is empty, then returns every result so far.
  std::vector<TargetResult> results();
  // Programs queued and not yet checked.
  size_t pending();

 private:
  struct Job {
    std::string program;
    std::string label;
    std::string compile_options;
    std::string dump_path;
    std::string hash;
  };
  void run();
  void check(const Job& job, const TargetSpec& target);

  std::atomic<bool> active_{false};
  std::mutex control_;  // held through set_targets: one restart of the worker at a time
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<TargetSpec> targets_;
  std::deque<Job> queue_;
  bool busy_ = false;  // the worker is checking a job taken off the queue
  bool stopping_ = false;
  std::map<std::string, size_t> seen_;  // program hash -> index of its first result
  std::vector<TargetResult> results_;
  std::thread worker_;
};

// The process's one checker (idle until set_targets).
TargetCheck& target_check();

}  // namespace tpu::runtime
