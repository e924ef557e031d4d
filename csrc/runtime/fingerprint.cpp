#include "runtime/fingerprint.h"

#include <cstdio>

#include "hlo/hash.h"

namespace tpu::runtime {

uint64_t fnv1a_64(std::string_view bytes) { return hlo::structural_hash(bytes); }

std::string fnv1a_128_hex(std::string_view bytes) {
  using u128 = unsigned __int128;
  // Offset basis 0x6c62272e07bb014262b821756295c58d, prime 2^88 + 2^8 + 0x3b.
  u128 hash = (static_cast<u128>(0x6c62272e07bb0142ULL) << 64) | 0x62b821756295c58dULL;
  const u128 prime = (static_cast<u128>(1) << 88) + (1 << 8) + 0x3b;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= prime;
  }
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(hash >> 64),
                static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace tpu::runtime
