#include "runtime/compile_parallelism.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#if defined(__linux__)
#include <sched.h>
#endif

namespace tpu::runtime {

namespace {

// Bytes per element of a StableHLO element type name (f32, bf16, i1, ui8, complex<f32>...);
// 0 for a name it does not know.
int64_t element_bytes(const std::string& name) {
  if (name.rfind("complex<", 0) == 0) return 2 * element_bytes(name.substr(8, name.size() - 9));
  if (name == "i1") return 1;
  size_t digits = name.find_first_of("0123456789");
  if (digits == std::string::npos) return 0;
  int bits = std::atoi(name.c_str() + digits);
  if (name.rfind("f8", 0) == 0) bits = 8;  // f8E4M3FN and kin
  return bits <= 0 ? 0 : (bits + 7) / 8;
}

}  // namespace

int64_t largest_tensor_bytes(const std::string& program) {
  int64_t largest = 0;
  static const char kOpen[] = "tensor<";
  for (size_t at = program.find(kOpen); at != std::string::npos; at = program.find(kOpen, at + 1)) {
    const size_t begin = at + sizeof(kOpen) - 1;
    size_t end = begin;
    for (int depth = 1; end < program.size(); ++end) {  // complex<f32> nests a '<'
      if (program[end] == '<') ++depth;
      if (program[end] == '>' && --depth == 0) break;
    }
    if (end >= program.size()) break;
    const std::string type = program.substr(begin, end - begin);
    int64_t elements = 1;
    size_t pos = 0;
    while (pos < type.size() && type[pos] >= '0' && type[pos] <= '9') {
      size_t x = type.find('x', pos);
      if (x == std::string::npos) break;
      elements *= std::strtoll(type.c_str() + pos, nullptr, 10);
      pos = x + 1;
    }
    // A dynamic dimension (?) could be of any size: count it as large.
    if (pos < type.size() && type[pos] == '?') return INT64_MAX;
    std::string element = type.substr(pos);
    element = element.substr(0, element.find(','));  // drop an encoding after the type
    largest = std::max(largest, elements * element_bytes(element));
  }
  return largest;
}

int64_t one_core_compile_below_bytes() {
  const char* value = std::getenv("TORCH_TPU_CPU_SMALL_PROGRAM_BYTES");
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  long long bytes = std::strtoll(value, &end, 10);
  if (*end != '\0' || bytes < 0) {
    throw std::invalid_argument(
        std::string("TORCH_TPU_CPU_SMALL_PROGRAM_BYTES must be a size in bytes (0: off), got '") +
        value + "'");
  }
  return bytes;
}

OneCoreCompile::OneCoreCompile() {
#if defined(__linux__)
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) <= 1) return;
  int first = 0;
  while (first < CPU_SETSIZE && !CPU_ISSET(first, &allowed)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return;
  saved_.assign(reinterpret_cast<const char*>(&allowed), sizeof allowed);
  active_ = true;
#endif
}

OneCoreCompile::~OneCoreCompile() {
#if defined(__linux__)
  if (!active_) return;
  cpu_set_t allowed;
  std::memcpy(&allowed, saved_.data(), sizeof allowed);
  sched_setaffinity(0, sizeof allowed, &allowed);
#endif
}

}  // namespace tpu::runtime
