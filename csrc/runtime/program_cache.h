#pragma once
// Compiled programs, keyed by their StableHLO text (the text itself, not a hash, so
// two programs can never be confused). Looked up in memory, then in the disk cache
// (if one is set), and compiled only when both miss. Executables are portable: one
// compile serves every device. Every program goes through here: eager per-op
// programs and fused graphs alike.
//
// At most max_programs() executables stay loaded; the least recently used go first (the
// disk cache brings them back). XLA:CPU maps about three memory regions per loaded
// program, and Linux allows a process 65530 (vm.max_map_count): a process that loads
// ~20,000 programs (PyTorch's device test files do) ran out of mappings and crashed
// inside XLA's JIT loader.
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pjrt/client.h"
#include "runtime/disk_cache.h"
#include "runtime/recompile_log.h"

namespace tpu::runtime {

class ProgramCache {
 public:
  explicit ProgramCache(const pjrt::Client& client);

  // Returns the executable for `program`, loading or compiling it on first use.
  // `label` (an op or graph name) only serves the recompile log.
  std::shared_ptr<pjrt::Executable> get(const std::string& program, const std::string& label = "");
  // The same for a program compiled with its own xla.CompileOptionsProto (a replicated
  // collective): the options are part of its key, in memory and on disk.
  std::shared_ptr<pjrt::Executable> get(const std::string& program, const std::string& label,
                                        const std::string& compile_options);
  size_t size();
  // Forgets the compiled programs held in memory (the disk cache is kept).
  void clear();
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
                                            const std::string& compile_options);
  // get() of `key`: the program text, followed by a comment naming its compile options
  // when they are not the portable default.
  std::shared_ptr<pjrt::Executable> get_keyed(const std::string& key, const std::string& program,
                                              const std::string& label,
                                              const std::string& compile_options);

  const pjrt::Client& client_;
  std::mutex mutex_;
  struct Entry {
    std::shared_ptr<pjrt::Executable> executable;
    std::list<const std::string*>::iterator recent;  // its place in recent_
  };
  // Drops least recently used executables beyond max_programs_ (lock held).
  void evict();

  std::unordered_map<std::string, Entry> programs_;
  std::list<const std::string*> recent_;  // keys of programs_, most recently used first
  // Evicted executables live on a little while: a run enqueued just before may still use one.
  std::deque<std::shared_ptr<pjrt::Executable>> evicted_;
  size_t max_programs_;
  std::shared_ptr<DiskCache> disk_;
  RecompileLog log_;
};

}  // namespace tpu::runtime
