#pragma once
// Compiled programs on disk, so a restarted process reaches its steady state without
// compiling. One file per program: a header (magic, format version, the full key,
// payload length and checksum) then the serialized executable. Several processes,
// even several hosts, may share one directory:
// - writes go to a temporary file in the same directory, then rename() over the
//   entry, so a reader sees an old or a new entry, never a partial one;
// - every entry is validated on load, and anything wrong with it (truncated,
//   corrupt, another plugin or torch_tpu version, not ours) makes it a miss and
//   deletes it: the program is simply compiled again;
// - the directory has a size cap, enforced by evicting the least recently used
//   entries (by file modification time, refreshed on every hit).
#include <cstdint>
#include <mutex>
#include <string>

namespace tpu::runtime {

struct DiskCacheSettings {
  static constexpr int64_t kDefaultMaxBytes = int64_t{2} << 30;  // 2 GiB

  std::string directory;  // empty: no disk cache
  int64_t max_bytes = kDefaultMaxBytes;

  // TORCH_TPU_CACHE_DIR (unset: $XDG_CACHE_HOME/torch_tpu or ~/.cache/torch_tpu;
  // empty or "off": disabled) and TORCH_TPU_CACHE_MAX_BYTES (bytes, or with a K, M,
  // G or T suffix). Throws std::invalid_argument for a malformed size.
  static DiskCacheSettings from_environment();
};

// Parses "1048576", "512M", "2G" (binary units); throws std::invalid_argument.
int64_t parse_byte_size(const std::string& text);

struct DiskLookup {
  enum class Status { Hit, Miss, Rejected };
  Status status = Status::Miss;
  std::string payload;  // the serialized executable, on Hit
  std::string why;      // what was wrong with the entry, on Rejected
};

struct DiskUsage {
  int64_t entries = 0;
  int64_t bytes = 0;
};

class DiskCache {
 public:
  // `identity` is everything besides the program that decides whether a stored
  // executable fits this process: plugin identity and version, compile options,
  // torch_tpu's version. It is part of the key and is stored in each entry.
  DiskCache(std::string directory, int64_t max_bytes, std::string identity);

  const std::string& directory() const { return directory_; }
  int64_t max_bytes() const { return max_bytes_; }
  const std::string& identity() const { return identity_; }

  // The stored payload for `program`. Never throws for file problems: an absent
  // entry is a Miss, a bad one is deleted and Rejected (both counted in metrics).
  // The caller then reports the outcome with mark_used() or reject().
  DiskLookup load(const std::string& program);
  // The payload of a Hit was usable: counts the hit and refreshes its LRU time.
  void mark_used(const std::string& program);
  // The payload of a Hit was not usable (the plugin refused it): deletes the entry.
  void reject(const std::string& program);

  // Writes the entry atomically, then evicts least recently used entries if the
  // directory is over its cap. Failures (read-only directory, full disk) warn once
  // and are otherwise ignored: the cache is an optimisation.
  void store(const std::string& program, const std::string& payload);

  // Entries and bytes now in the directory (a scan).
  DiskUsage usage() const;
  // Deletes every entry (and temporary files left by writers that died).
  void clear();

  // The entry's file: a 128-bit hash of identity and program, so distinct plugins or
  // versions sharing a directory never compete for one name.
  std::string path_of(const std::string& program) const;

 private:
  // Rescans the directory and deletes the oldest entries until it fits the cap.
  void evict_to_cap();

  std::string directory_;
  int64_t max_bytes_;
  std::string identity_;

  std::mutex mutex_;
  // What this process believes the directory holds; other processes' writes make it
  // an underestimate, so it is refreshed by a scan every so many writes.
  int64_t estimated_bytes_ = -1;  // -1: not scanned yet
  int64_t writes_since_scan_ = 0;
};

}  // namespace tpu::runtime
