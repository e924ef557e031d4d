#include "hlo/hash.h"

#include <cstdio>

namespace tpu::hlo {

uint64_t structural_hash(std::string_view module_text) {
  // FNV-1a: simple, fast enough for per-compile use, and fixed by its definition.
  uint64_t hash = 14695981039346656037ULL;
  for (unsigned char c : module_text) {
    hash ^= c;
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string structural_hash_hex(std::string_view module_text) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(structural_hash(module_text)));
  return text;
}

}  // namespace tpu::hlo
