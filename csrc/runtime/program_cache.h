#pragma once
// Compiled programs, keyed by their StableHLO text (the text itself, not a hash, so
// two programs can never be confused). Looked up in memory, then in the disk cache
// (if one is set), and compiled only when both miss. Executables are portable: one
// compile serves every device. Every program goes through here: eager per-op
// programs and fused graphs alike.
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
  explicit ProgramCache(const pjrt::Client& client) : client_(client) {}

  // Returns the executable for `program`, loading or compiling it on first use.
  // `label` (an op or graph name) only serves the recompile log.
  std::shared_ptr<pjrt::Executable> get(const std::string& program, const std::string& label = "");
  size_t size();
  // Forgets the compiled programs held in memory (the disk cache is kept).
  void clear();

  // The disk cache to read and fill; null (the default) for none.
  void set_disk_cache(std::shared_ptr<DiskCache> disk);
  std::shared_ptr<DiskCache> disk_cache();

 private:
  // Compiles `program` (a disk miss), logging why if asked; `rejected` says why a disk
  // entry could not be used, if one was found.
  std::shared_ptr<pjrt::Executable> compile(const std::string& program, const std::string& label,
                                            const std::string& rejected);

  const pjrt::Client& client_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<pjrt::Executable>> programs_;
  std::shared_ptr<DiskCache> disk_;
  RecompileLog log_;
};

}  // namespace tpu::runtime
