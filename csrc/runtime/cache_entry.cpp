#include "runtime/cache_entry.h"

#include <cstring>

#include "runtime/fingerprint.h"

namespace tpu::runtime {

namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'E', 'X', 'E', 'C', '\n'};
constexpr size_t kHeaderSize = 8 + 4 + 4 + 4 * 8;

void put(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get(const std::string& in, size_t offset, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  }
  return value;
}

// The first "name=value" line of `ours` that `theirs` lacks: what makes an entry
// foreign (identities are one field per line).
std::string first_difference(const std::string& ours, const std::string& theirs) {
  size_t start = 0;
  while (start < ours.size()) {
    size_t end = ours.find('\n', start);
    if (end == std::string::npos) end = ours.size();
    std::string line = ours.substr(start, end - start);
    if (("\n" + theirs + "\n").find("\n" + line + "\n") == std::string::npos) {
      return "this process has " + line;
    }
    start = end + 1;
  }
  return "its identity differs";
}

}  // namespace

std::string encode_entry(const std::string& identity, const std::string& program,
                         const std::string& payload) {
  std::string out(kMagic, sizeof kMagic);
  out.reserve(kHeaderSize + identity.size() + program.size() + payload.size());
  put(out, kEntryFormat, 4);
  put(out, 0, 4);
  put(out, identity.size(), 8);
  put(out, program.size(), 8);
  put(out, payload.size(), 8);
  put(out, fnv1a_64(payload), 8);
  out += identity;
  out += program;
  out += payload;
  return out;
}

bool decode_entry(const std::string& bytes, const std::string& identity, const std::string& program,
                  std::string* payload, std::string* why) {
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    *why = "not a torch_tpu cache entry";
    return false;
  }
  uint64_t format = get(bytes, 8, 4);
  if (format != kEntryFormat || get(bytes, 12, 4) != 0) {
    *why = "entry format " + std::to_string(format) + ", this build reads " +
           std::to_string(kEntryFormat);
    return false;
  }
  uint64_t identity_size = get(bytes, 16, 8);
  uint64_t program_size = get(bytes, 24, 8);
  uint64_t payload_size = get(bytes, 32, 8);
  uint64_t available = bytes.size() - kHeaderSize;
  // Checked one at a time so corrupt sizes cannot overflow the sum.
  if (identity_size > available || program_size > available - identity_size ||
      payload_size != available - identity_size - program_size) {
    *why = "truncated or padded (" + std::to_string(bytes.size()) + " bytes)";
    return false;
  }
  size_t offset = kHeaderSize;
  if (bytes.compare(offset, identity_size, identity) != 0 || identity_size != identity.size()) {
    *why = "written for another plugin, compile options or torch_tpu version (" +
           first_difference(identity, bytes.substr(offset, identity_size)) + ")";
    return false;
  }
  offset += identity_size;
  if (program_size != program.size() || bytes.compare(offset, program_size, program) != 0) {
    *why = "holds another program (a file-name hash collision, or a corrupt key)";
    return false;
  }
  offset += program_size;
  std::string stored = bytes.substr(offset);
  if (fnv1a_64(stored) != get(bytes, 40, 8)) {
    *why = "payload checksum mismatch (corrupt)";
    return false;
  }
  *payload = std::move(stored);
  return true;
}

}  // namespace tpu::runtime
