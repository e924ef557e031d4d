#pragma once
// Compiled programs, keyed by their StableHLO text (the text itself, not a hash, so
// two programs can never be confused). Looked up in memory, then in the disk cache
// (if one is set), and compiled only when both miss. Executables are portable: one
// compile serves every device. Every program goes through here: eager per-op
// programs and fused graphs alike.
//
// At most max_programs() executables stay loaded; the least recently used go first (the
// disk cache brings them back). XLA:CPU maps about three memory regions per kernel of a
// loaded program, and Linux allows a process 65530 (vm.max_map_count): a process that loads
// ~20,000 programs (PyTorch's device test files do) ran out of mappings and crashed
// inside XLA's JIT loader. A count of programs does not bound the mappings (a fused graph
// of a hundred ops has a hundred kernels), so every 64 loads (8 near the limit) the cache
// also counts the process's mappings and, past half the limit, keeps fewer programs
// (runtime/process_mappings.h).
#include <atomic>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pjrt/client.h"
#include "runtime/disk_cache.h"
#include "runtime/process_mappings.h"
#include "runtime/recompile_log.h"

namespace tpu::runtime {

// What a program is compiled for. A process meets thousands of distinct one-op eager
// programs, most run a few times on small tensors: they are compiled for latency. Fused
// graphs (defer_and_fuse, torch.compile) and kernels run many times: compiled for speed.
//
// QuickOp is an op on small tensors, compiled in tiers: first without LLVM's optimizations
// (a third to two thirds less compile time, a slower loop that small tensors hardly
// notice), then, once it has run kTierUpRuns times, with the op options, replacing the
// first version. Code that meets many shapes (variable lengths, test suites) pays the
// quick compile once per shape; a hot op ends up as fast as ever.
enum class ProgramKind { Op, Graph, QuickOp };
constexpr uint32_t kTierUpRuns = 16;
// A portable op program that has run this often on one device gets a copy loaded for that
// device (pin()); rarely run programs are not worth the load (about a millisecond).
// TORCH_TPU_PIN_PROGRAMS=N pins after N runs instead (0: never).
constexpr uint32_t kPinRuns = 32;
// Ops whose operands and results together are at most this big may be QuickOps.
constexpr size_t kQuickOpMaxBytes = 32 * 1024;

// The compile options of `kind` on this client's plugin. On XLA:CPU an op is compiled
// without the MLIR fusion emitters (xla_cpu_use_fusion_emitters=false): they cost about
// 40% of a one-op program's compile time and speed up only fused loops.
// TORCH_TPU_FAST_OP_COMPILE=0 compiles ops like graphs (and no QuickOp tiers); =2 compiles
// every op without LLVM's optimizations (xla_backend_optimization_level=0), never tiering up.
// `base`: the serialized xla.CompileOptionsProto to add them to (by default the portable
// one; a program pinned to one device loads with its kind's options over that device's).
std::string compile_options_for(const pjrt::Client& client, ProgramKind kind,
                                std::string base = pjrt::portable_compile_options());
// The same for a platform by name ("cpu", "tpu", "cuda"): a compile-only target's options
// are those its platform's runtime compiles with.
std::string compile_options_for(const std::string& platform, ProgramKind kind,
                                std::string base = pjrt::portable_compile_options());

// The key (in memory and on disk) of `program` compiled with its own options (a
// replicated collective): the text, then a comment naming the options.
std::string key_with_options(const std::string& program, const std::string& compile_options);

class ProgramCache {
 public:
  explicit ProgramCache(const pjrt::Client& client);

  // Returns the executable for `program`, loading or compiling it on first use.
  // `label` (an op or graph name) only serves the recompile log. The kind's options are
  // not part of the key: an op's text and a graph's never coincide (a graph calls its
  // ops as functions @f0...), and the disk cache's identity holds both options.
  std::shared_ptr<pjrt::Executable> get(const std::string& program, const std::string& label = "",
                                        ProgramKind kind = ProgramKind::Op);
  // The same for a program compiled with its own xla.CompileOptionsProto (a replicated
  // collective): the options are part of its key, in memory and on disk.
  std::shared_ptr<pjrt::Executable> get(const std::string& program, const std::string& label,
                                        const std::string& compile_options);
  size_t size();
  // Whether QuickOp programs are compiled in tiers (the CPU platform, by default).
  bool tiered() const { return tiered_; }
  // Called after each run of a one-op program on `device`: replaces a quick version that
  // has run kTierUpRuns times by the optimized one (which later get()s return), and pins
  // a portable one that has run pin_runs() times to the device of that run.
  void note_run(const pjrt::Executable& executable, int device) {
    const uint32_t runs = executable.count_run();
    if (executable.quick()) {
      if (runs == kTierUpRuns) tier_up(executable);
    } else if (runs == pin_runs_.load(std::memory_order_relaxed) &&
               executable.pin_source() != nullptr) {
      pin(executable, device);
    }
  }
  // Forgets the compiled programs held in memory (the disk cache is kept).
  void clear();
  // Counts clear() calls: whoever remembers an executable outside this cache (a
  // defer_and_fuse graph's structure) drops it when this changes.
  uint64_t generation() const { return generation_.load(); }
  // The most executables kept loaded: TORCH_TPU_MAX_PROGRAMS, default 4096.
  size_t max_programs() const { return max_programs_; }
  void set_max_programs(size_t count);

  // The disk cache to read and fill; null (the default) for none.
  void set_disk_cache(std::shared_ptr<DiskCache> disk);
  std::shared_ptr<DiskCache> disk_cache();

 private:
  // Compiles `program` (a disk miss), logging why if asked; `rejected` says why a disk
  // entry could not be used, if one was found.
  std::shared_ptr<pjrt::Executable> compile(const std::string& program, const std::string& label,
                                            const std::string& rejected,
                                            const std::string& compile_options,
                                            bool tier_up = false);
  std::shared_ptr<pjrt::Executable> get_quick(const std::string& program, const std::string& label);
  void tier_up(const pjrt::Executable& quick);
  // Loads a copy of `executable` for `device` alone (Executable::set_pinned). A plugin
  // that cannot load it so turns pinning off: programs keep running portably.
  void pin(const pjrt::Executable& executable, int device);
  // get() of `key`: the program text, followed by a comment naming its compile options
  // when they are not the portable default.
  // `tier_up`: the optimized version of a quick one (counted as a tier-up, not a compile).
  std::shared_ptr<pjrt::Executable> get_keyed(const std::string& key, const std::string& program,
                                              const std::string& label,
                                              const std::string& compile_options,
                                              bool tier_up = false);

  const pjrt::Client& client_;
  const std::string op_options_;
  const std::string graph_options_;
  const std::string quick_options_;
  const bool tiered_;
  // XLA:CPU compiles this process's programs for one core (compile_parallelism.h).
  const bool one_core_compile_;
  // Runs before a program is pinned; 0: never. Pinning is measured on XLA:CPU only.
  std::atomic<uint32_t> pin_runs_;
  // Quick executables not yet replaced -> their program text and label.
  std::unordered_map<const pjrt::Executable*, std::pair<std::string, std::string>> quick_programs_;
  std::mutex mutex_;
  struct Entry {
    std::shared_ptr<pjrt::Executable> executable;
    std::list<const std::string*>::iterator recent;  // its place in recent_
  };
  // Drops least recently used executables beyond max_programs_ and mapping_cap_ (lock held).
  void evict();
  // Counts the process's mappings; past half of the limit, lowers mapping_cap_ so that
  // the programs kept bring them down to three eighths of it, and evicts (takes the lock).
  void check_mappings();

  std::unordered_map<std::string, Entry> programs_;
  std::list<const std::string*> recent_;  // keys of programs_, most recently used first
  // Evicted executables live on a little while: a run enqueued just before may still use one.
  std::deque<std::shared_ptr<pjrt::Executable>> evicted_;
  std::atomic<uint64_t> generation_{0};
  size_t max_programs_;
  // Loads between two counts of the process's mappings: 64, or 8 past a quarter of the limit.
  size_t mapping_check_every_ = 64;
  size_t loads_since_mapping_check_ = 0;
  // The mappings the process had before this cache loaded anything.
  const size_t mapping_baseline_;
  // The most programs the mapping limit allows, as last measured; no limit until then.
  size_t mapping_cap_ = SIZE_MAX;
  std::shared_ptr<DiskCache> disk_;
  RecompileLog log_;
};

}  // namespace tpu::runtime
