#include "runtime/process_mappings.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace tpu::runtime {

size_t count_process_mappings() {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return 0;
  size_t lines = 0;
  char chunk[1 << 16];
  size_t read = 0;
  while ((read = std::fread(chunk, 1, sizeof(chunk), maps)) > 0) {
    for (const char* at = chunk; (at = static_cast<const char*>(
                                      std::memchr(at, '\n', chunk + read - at))) != nullptr;
         ++at) {
      ++lines;
    }
  }
  std::fclose(maps);
  return lines;
}

size_t process_mapping_limit() {
  static const size_t limit = [] {
    size_t value = 65530;
    if (const char* text = std::getenv("TORCH_TPU_MAPPING_LIMIT"); text && *text) {
      char* end = nullptr;
      unsigned long long given = std::strtoull(text, &end, 10);
      if (*end != '\0' || given == 0) {
        throw std::invalid_argument(
            std::string("TORCH_TPU_MAPPING_LIMIT must be a positive count, got '") + text + "'");
      }
      return static_cast<size_t>(given);
    }
    if (std::FILE* file = std::fopen("/proc/sys/vm/max_map_count", "r")) {
      unsigned long long read = 0;
      if (std::fscanf(file, "%llu", &read) == 1 && read > 0) value = static_cast<size_t>(read);
      std::fclose(file);
    }
    return value;
  }();
  return limit;
}

size_t programs_to_keep(size_t programs, size_t mappings, size_t baseline, size_t target,
                        size_t floor) {
  if (mappings <= target || programs == 0) return std::max(programs, floor);
  const size_t held = mappings > baseline ? mappings - baseline : 0;
  const size_t allowed = target > baseline ? target - baseline : 0;
  if (held == 0) return std::max(programs, floor);
  // Each program holds held / programs mappings on average.
  const size_t keep = static_cast<size_t>(static_cast<double>(programs) * allowed / held);
  return std::max(std::min(keep, programs), floor);
}

}  // namespace tpu::runtime
