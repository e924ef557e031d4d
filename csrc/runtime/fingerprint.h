#pragma once
// Stable content hashes for naming and checking disk-cache files. Unlike std::hash
// they are fixed by definition (FNV-1a), the same in every process, build and host.
#include <cstdint>
#include <string>
#include <string_view>

namespace tpu::runtime {

// 64-bit FNV-1a: a checksum. Any single changed byte always changes it (each step is
// a bijection of the state), so bit flips in a payload are caught.
uint64_t fnv1a_64(std::string_view bytes);

// 128-bit FNV-1a as 32 lowercase hex digits: a file name for a key. Collisions are not
// trusted anyway: entries store their full key and it is compared on load.
std::string fnv1a_128_hex(std::string_view bytes);

}  // namespace tpu::runtime
