#include "runtime/program_cache.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "pjrt/error.h"
#include "runtime/compile_errors.h"
#include "runtime/compile_parallelism.h"
#include "runtime/metrics.h"
#include "runtime/program_dump.h"
#include "runtime/target_check.h"
#include "runtime/xla_cpu_shortcuts.h"

namespace tpu::runtime {

namespace {
size_t max_programs_from_environment() {
  const char* text = std::getenv("TORCH_TPU_MAX_PROGRAMS");
  if (text == nullptr || *text == '\0') return 4096;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 1) {
    throw std::invalid_argument(
        std::string("TORCH_TPU_MAX_PROGRAMS must be a positive count, got '") + text + "'");
  }
  return static_cast<size_t>(value);
}

uint32_t pin_runs_from_environment(const pjrt::Client& client) {
  if (!xla_cpu_shortcuts(client.platform_name())) return 0;
  const char* text = std::getenv("TORCH_TPU_PIN_PROGRAMS");
  if (text == nullptr || *text == '\0') return kPinRuns;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1000000) {
    throw std::invalid_argument(
        std::string("TORCH_TPU_PIN_PROGRAMS must be a count of runs (0: never), got '") + text +
        "'");
  }
  return static_cast<uint32_t>(value);
}

std::string fast_op_compile_level() {
  const char* fast = std::getenv("TORCH_TPU_FAST_OP_COMPILE");
  return fast == nullptr || *fast == '\0' ? "1" : fast;
}

// The text a quick version is kept under, in memory and on disk (an MLIR comment).
std::string quick_key(const std::string& program) { return program + "// tier: quick\n"; }
}  // namespace

std::string key_with_options(const std::string& program, const std::string& compile_options) {
  // An MLIR comment, so the key is still the text of a valid module (dumps stay usable).
  static const char kHex[] = "0123456789abcdef";
  std::string key = program + "\n// compile options: ";
  for (unsigned char c : compile_options) {
    key.push_back(kHex[c >> 4]);
    key.push_back(kHex[c & 15]);
  }
  key.push_back('\n');
  return key;
}

std::string compile_options_for(const pjrt::Client& client, ProgramKind kind, std::string base) {
  return compile_options_for(client.platform_name(), kind, std::move(base));
}

std::string compile_options_for(const std::string& platform, ProgramKind kind, std::string base) {
  std::string options = std::move(base);
  const std::string level = fast_op_compile_level();
  if (kind == ProgramKind::Graph || level == "0" || !xla_cpu_shortcuts(platform)) {
    return options;
  }
  options = pjrt::with_option_override(options, "xla_cpu_use_fusion_emitters", false);
  // LLVM's -O0: a third to two thirds of an op's compile time, but its loops run up to 13x
  // slower on large tensors: for a quick first tier, or for code that meets many shapes and
  // runs each a few times (a test suite), not for a training loop.
  if (kind == ProgramKind::QuickOp || level == "2") {
    options = pjrt::with_option_override(options, "xla_backend_optimization_level", int64_t{0});
  }
  return options;
}

ProgramCache::ProgramCache(const pjrt::Client& client)
    : client_(client),
      op_options_(compile_options_for(client, ProgramKind::Op)),
      graph_options_(compile_options_for(client, ProgramKind::Graph)),
      quick_options_(compile_options_for(client, ProgramKind::QuickOp)),
      tiered_(xla_cpu_shortcuts(client.platform_name()) && fast_op_compile_level() == "1"),
      one_core_compile_(xla_cpu_shortcuts(client.platform_name()) && one_core_compile_requested()),
      pin_runs_(pin_runs_from_environment(client)),
      max_programs_(max_programs_from_environment()),
      mapping_baseline_(count_process_mappings()) {
  process_mapping_limit();  // a bad TORCH_TPU_MAPPING_LIMIT fails at the first use, not later
}

std::shared_ptr<pjrt::Executable> ProgramCache::get(const std::string& program,
                                                    const std::string& label, ProgramKind kind) {
  if (kind == ProgramKind::QuickOp) {
    if (tiered_) return get_quick(program, label);
    kind = ProgramKind::Op;
  }
  return get_keyed(program, program, label, kind == ProgramKind::Op ? op_options_ : graph_options_);
}

std::shared_ptr<pjrt::Executable> ProgramCache::get_quick(const std::string& program,
                                                          const std::string& label) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = programs_.find(program);  // optimized already
    if (found != programs_.end()) {
      metrics().count_cache_hit();
      recent_.splice(recent_.begin(), recent_, found->second.recent);
      return found->second.executable;
    }
  }
  std::shared_ptr<pjrt::Executable> executable =
      get_keyed(quick_key(program), program, label, quick_options_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!executable->quick()) {
    executable->mark_quick();
    quick_programs_.insert_or_assign(executable.get(), std::make_pair(program, label));
  }
  return executable;
}

void ProgramCache::tier_up(const pjrt::Executable& quick) {
  std::string program, label;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = quick_programs_.find(&quick);
    if (found == quick_programs_.end()) return;  // evicted or cleared meanwhile
    program = std::move(found->second.first);
    label = std::move(found->second.second);
    quick_programs_.erase(found);
  }
  // Loaded from disk if an earlier process optimized it; compiled here otherwise.
  get_keyed(program, program, label, op_options_, /*tier_up=*/true);
  metrics().count_tier_up();
  std::lock_guard<std::mutex> lock(mutex_);
  auto stale = programs_.find(quick_key(program));
  if (stale != programs_.end() && stale->second.executable.get() == &quick) {
    recent_.erase(stale->second.recent);
    programs_.erase(stale);  // its last user lets it go
  }
}

void ProgramCache::pin(const pjrt::Executable& executable, int device) {
  const pjrt::Executable::PinSource& source = *executable.pin_source();
  std::string bytes;
  if (source.from_disk) {
    // XLA:CPU serializes a loaded executable without its kernels: the copy would load and
    // then fail its first run. Its disk entry has them.
    std::string key;
    std::shared_ptr<DiskCache> disk;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      disk = disk_;
      for (const auto& [program, entry] : programs_) {  // once per pinned program
        if (entry.executable.get() == &executable) {
          key = program;
          break;
        }
      }
    }
    if (key.empty() || disk == nullptr) return;  // evicted meanwhile, or the cache turned off
    DiskLookup found = disk->load(key);
    if (found.status != DiskLookup::Status::Hit) return;
    bytes = std::move(found.payload);
  }
  if (bytes.empty()) {
    // Some programs cannot be serialized (XLA:CPU: a sort's comparator): they stay portable.
    try {
      bytes = executable.serialize();
    } catch (const std::exception&) {
      return;
    }
  }
  try {
    // The kind's own options too, over the device's assignment: XLA:CPU looks an op's
    // kernels up by the emitters named in the options it loads with.
    const ProgramKind kind = source.graph_options ? ProgramKind::Graph : ProgramKind::Op;
    const std::string options = compile_options_for(
        client_, kind, pjrt::replicated_compile_options({client_.device_info(device).id}));
    executable.set_pinned(device, client_.deserialize(bytes, options));
    metrics().count_pinned_program();
  } catch (const std::exception& error) {
    if (pin_runs_.exchange(0) != 0) {
      RecompileLog::write(std::string("warning: programs run portably: cannot load one for ") +
                          "a single device (" + error.what() + ")");
    }
  }
}

std::shared_ptr<pjrt::Executable> ProgramCache::get(const std::string& program,
                                                    const std::string& label,
                                                    const std::string& compile_options) {
  if (compile_options.empty()) return get(program, label, ProgramKind::Graph);
  std::string key = key_with_options(program, compile_options);
  return get_keyed(key, program, label, compile_options);
}

std::shared_ptr<pjrt::Executable> ProgramCache::get_keyed(const std::string& key,
                                                          const std::string& program,
                                                          const std::string& label,
                                                          const std::string& compile_options,
                                                          bool tier_up) {
  std::shared_ptr<DiskCache> disk;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = programs_.find(key);
    if (found != programs_.end()) {
      metrics().count_cache_hit();
      recent_.splice(recent_.begin(), recent_, found->second.recent);
      return found->second.executable;
    }
    disk = disk_;
  }
  const std::string dump_path = dump_program(key, label);
  target_check().submit(program, label, compile_options, dump_path);
  std::shared_ptr<pjrt::Executable> executable;
  std::string rejected;
  bool from_disk = false;
  if (disk != nullptr) {
    DiskLookup found = disk->load(key);
    if (found.status == DiskLookup::Status::Hit) {
      std::string why;
      executable = client_.try_deserialize(found.payload, &why);
      if (executable != nullptr) {
        disk->mark_used(key);
        from_disk = true;
      } else {
        // Intact bytes the plugin still refuses (e.g. a plugin rebuilt in place).
        disk->reject(key);
        rejected = "the plugin cannot load it: " + why;
      }
    } else if (found.status == DiskLookup::Status::Rejected) {
      rejected = found.why;
    }
  }
  if (executable == nullptr) {
    executable = compile(program, label, rejected, compile_options, tier_up);
    if (disk != nullptr) {
      try {
        disk->store(key, executable->serialize());
      } catch (const std::exception& error) {
        // A plugin that cannot serialize still runs everything; it just recompiles.
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true)) {
          RecompileLog::write("warning: cannot serialize compiled programs for the disk cache (" +
                              std::string(error.what()) + ")");
        }
      }
    }
  }
  // Only portable programs: a replicated one (a collective) already names its devices.
  if (compile_options == op_options_ || compile_options == graph_options_) {
    executable->mark_pinnable({/*graph_options=*/compile_options != op_options_, from_disk});
  }
  bool count_mappings = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [entry, added] = programs_.try_emplace(key, Entry{executable, {}});
    if (!added) return entry->second.executable;  // another thread loaded it meanwhile
    recent_.push_front(&entry->first);
    entry->second.recent = recent_.begin();
    count_mappings = ++loads_since_mapping_check_ >= mapping_check_every_;
    if (count_mappings) loads_since_mapping_check_ = 0;
    evict();
  }
  if (count_mappings) check_mappings();
  return executable;
}

void ProgramCache::check_mappings() {
  // Read outside the lock: tens of milliseconds at tens of thousands of mappings, while other
  // threads' cache hits take the lock.
  const size_t mappings = count_process_mappings();
  const size_t limit = process_mapping_limit();
  std::lock_guard<std::mutex> lock(mutex_);
  // Closer to the limit, a few large programs could cross it between two counts.
  mapping_check_every_ = mappings > limit / 4 ? 8 : 64;
  if (mappings == 0 || mappings < limit / 2) return;
  const size_t keep =
      programs_to_keep(programs_.size(), mappings, mapping_baseline_, limit / 8 * 3, 64);
  if (keep >= mapping_cap_) return;
  if (mapping_cap_ == SIZE_MAX) {
    RecompileLog::write("warning: " + std::to_string(mappings) + " memory mappings of at most " +
                        std::to_string(limit) + " (vm.max_map_count): keeping " +
                        std::to_string(keep) + " compiled programs loaded instead of " +
                        std::to_string(programs_.size()));
  }
  mapping_cap_ = keep;
  evict();
}

void ProgramCache::evict() {
  while (programs_.size() > std::min(max_programs_, mapping_cap_)) {
    auto oldest = programs_.find(*recent_.back());
    recent_.pop_back();
    quick_programs_.erase(oldest->second.executable.get());
    evicted_.push_back(std::move(oldest->second.executable));
    programs_.erase(oldest);
  }
  while (evicted_.size() > 64) evicted_.pop_front();
}

void ProgramCache::set_max_programs(size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_programs_ = count < 1 ? 1 : count;
  evict();
}

std::shared_ptr<pjrt::Executable> ProgramCache::compile(const std::string& program,
                                                        const std::string& label,
                                                        const std::string& rejected,
                                                        const std::string& compile_options,
                                                        bool tier_up) {
  // A tier-up is no recompile (nothing about the call changed): neither logged nor counted
  // as one.
  std::string why = RecompileLog::enabled() && !tier_up ? log_.explain(label, program) : "";
  auto start = std::chrono::steady_clock::now();
  std::optional<OneCoreCompile> one_core;
  if (one_core_compile_) one_core.emplace();
  std::shared_ptr<pjrt::Executable> executable;
  try {
    executable = client_.compile(program, compile_options);
  } catch (const pjrt::Error& error) {
    throw pjrt::Error(error.code(),
                      explain_compile_error(label, client_.platform_name(), program, error.what()));
  }
  one_core.reset();
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (!tier_up) metrics().count_compile(elapsed.count());
  if (!why.empty()) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3f", elapsed.count());
    std::string line = "compile " + (label.empty() ? std::string("program") : label) + ": " + why;
    if (!rejected.empty()) line += "; disk cache entry rejected: " + rejected;
    RecompileLog::write(line + " in " + seconds + " s");
  }
  return executable;
}

size_t ProgramCache::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return programs_.size();
}

void ProgramCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  programs_.clear();
  recent_.clear();
  evicted_.clear();
  quick_programs_.clear();
  ++generation_;
}

void ProgramCache::set_disk_cache(std::shared_ptr<DiskCache> disk) {
  std::lock_guard<std::mutex> lock(mutex_);
  disk_ = std::move(disk);
}

std::shared_ptr<DiskCache> ProgramCache::disk_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  return disk_;
}

}  // namespace tpu::runtime
