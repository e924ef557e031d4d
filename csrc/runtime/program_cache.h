#pragma once
// Compiled programs in memory, keyed by (device, StableHLO text). The text is the
// key, not its hash, so two programs can never be confused.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "pjrt/client.h"

namespace tpu::runtime {

class ProgramCache {
 public:
  explicit ProgramCache(const pjrt::Client& client) : client_(client) {}

  // Returns the executable for `program` on `device`, compiling it on first use.
  std::shared_ptr<pjrt::Executable> get(const std::string& program, int device);
  size_t size();
  void clear();

 private:
  const pjrt::Client& client_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<pjrt::Executable>> programs_;
};

}  // namespace tpu::runtime
