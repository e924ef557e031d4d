#pragma once
// The byte layout of one disk-cache entry (all integers little-endian):
//
//   "TPUEXEC\n"              8 bytes of magic
//   format version           u32 (kEntryFormat)
//   reserved                 u32, zero
//   identity size            u64
//   program size             u64
//   payload size             u64
//   payload checksum         u64, FNV-1a 64 of the payload
//   identity, program, payload
//
// The full key (identity and program text) is stored and compared on load, so a
// hash collision in the file name can never hand back another program.
#include <cstdint>
#include <string>

namespace tpu::runtime {

constexpr uint32_t kEntryFormat = 1;

std::string encode_entry(const std::string& identity, const std::string& program,
                         const std::string& payload);

// The payload of `bytes` if it is a complete, intact entry for exactly this identity
// and program; otherwise false, with `why` saying what is wrong.
bool decode_entry(const std::string& bytes, const std::string& identity, const std::string& program,
                  std::string* payload, std::string* why);

}  // namespace tpu::runtime
