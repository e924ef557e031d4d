#include "runtime/program_cache.h"

#include <chrono>

#include "runtime/metrics.h"

namespace tpu::runtime {

std::shared_ptr<pjrt::Executable> ProgramCache::get(const std::string& program) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = programs_.find(program);
    if (found != programs_.end()) {
      metrics().count_cache_hit();
      return found->second;
    }
  }
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<pjrt::Executable> executable = client_.compile(program);
  std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  metrics().count_compile(elapsed.count());
  std::lock_guard<std::mutex> lock(mutex_);
  programs_.emplace(program, executable);
  return executable;
}

size_t ProgramCache::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return programs_.size();
}

void ProgramCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  programs_.clear();
}

}  // namespace tpu::runtime
