#pragma once
// Compiled programs in memory, keyed by their StableHLO text (the text itself, not
// a hash, so two programs can never be confused). Executables are portable: one
// compile serves every device.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pjrt/client.h"

namespace tpu::runtime {

class ProgramCache {
 public:
  explicit ProgramCache(const pjrt::Client& client) : client_(client) {}

  // Returns the executable for `program`, compiling it on first use.
  std::shared_ptr<pjrt::Executable> get(const std::string& program);
  size_t size();
  void clear();

 private:
  const pjrt::Client& client_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<pjrt::Executable>> programs_;
};

}  // namespace tpu::runtime
