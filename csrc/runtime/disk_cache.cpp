#include "runtime/disk_cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "runtime/cache_entry.h"
#include "runtime/fingerprint.h"
#include "runtime/metrics.h"

namespace tpu::runtime {

namespace fs = std::filesystem;

namespace {

constexpr char kEntrySuffix[] = ".tpuexec";
constexpr char kTempMarker[] = ".tpuexec.tmp.";
// A temporary file this old belongs to a writer that died; newer ones may be in use.
constexpr auto kStaleTemp = std::chrono::hours(1);
// Writes between rescans of the directory (other processes write to it too).
constexpr int64_t kWritesPerScan = 64;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_entry(const fs::path& path) { return ends_with(path.filename().string(), kEntrySuffix); }

bool is_temp(const fs::path& path) {
  return path.filename().string().find(kTempMarker) != std::string::npos;
}

// The cache is an optimisation: a failure to write it is reported once, not raised.
void warn_once(const std::string& message) {
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  std::fprintf(stderr,
               "[torch_tpu] warning: %s; compiled programs are not cached on disk (set "
               "TORCH_TPU_CACHE_DIR to a writable directory, or to 'off')\n",
               message.c_str());
  std::fflush(stderr);
}

bool read_file(const fs::path& path, std::string* bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return false;
  *bytes = contents.str();
  return true;
}

std::string temp_name(const fs::path& entry) {
  static std::atomic<uint64_t> counter{0};
  return entry.string() + ".tmp." + std::to_string(::getpid()) + "." +
         std::to_string(counter.fetch_add(1));
}

struct FileInfo {
  fs::path path;
  fs::file_time_type used;
  int64_t bytes;
};

// Every entry of `directory`; also removes temporary files left by dead writers.
std::vector<FileInfo> scan(const std::string& directory) {
  std::vector<FileInfo> entries;
  std::error_code ec;
  fs::directory_iterator it(directory, ec);
  if (ec) return entries;
  auto now = fs::file_time_type::clock::now();
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    std::error_code file_ec;
    const fs::path& path = it->path();
    if (is_temp(path)) {
      auto written = fs::last_write_time(path, file_ec);
      if (!file_ec && now - written > kStaleTemp) fs::remove(path, file_ec);
      continue;
    }
    if (!is_entry(path)) continue;
    auto used = fs::last_write_time(path, file_ec);
    auto size = fs::file_size(path, file_ec);
    if (file_ec) continue;  // removed by another process meanwhile
    entries.push_back({path, used, static_cast<int64_t>(size)});
  }
  return entries;
}

}  // namespace

int64_t parse_byte_size(const std::string& text) {
  size_t end = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(std::min(end, text.size()));
  int shift = -1;
  if (unit.empty()) shift = 0;
  if (unit.size() == 1) {
    const std::string units = "KMGT";
    size_t found = units.find(static_cast<char>(std::toupper(unit[0])));
    if (found != std::string::npos) shift = 10 * static_cast<int>(found + 1);
  }
  if (end == 0 || value <= 0 || shift < 0 || value > (INT64_MAX >> shift)) {
    throw std::invalid_argument(
        "TORCH_TPU_CACHE_MAX_BYTES must be a positive size in bytes, "
        "optionally with a K, M, G or T suffix (e.g. 2G); got '" +
        text + "'");
  }
  return static_cast<int64_t>(value) << shift;
}

DiskCacheSettings DiskCacheSettings::from_environment() {
  DiskCacheSettings settings;
  if (const char* dir = std::getenv("TORCH_TPU_CACHE_DIR")) {
    std::string value = dir;
    std::string lower = value;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    settings.directory = lower == "off" ? "" : value;
  } else if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    settings.directory = (fs::path(xdg) / "torch_tpu").string();
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    settings.directory = (fs::path(home) / ".cache" / "torch_tpu").string();
  }
  if (const char* max = std::getenv("TORCH_TPU_CACHE_MAX_BYTES"); max != nullptr && *max != '\0') {
    settings.max_bytes = parse_byte_size(max);
  }
  return settings;
}

DiskCache::DiskCache(std::string directory, int64_t max_bytes, std::string identity)
    : directory_(std::move(directory)), max_bytes_(max_bytes), identity_(std::move(identity)) {
  if (directory_.empty()) throw std::invalid_argument("the disk cache needs a directory");
  if (max_bytes_ <= 0) throw std::invalid_argument("the disk cache size cap must be positive");
}

std::string DiskCache::path_of(const std::string& program) const {
  std::string key = identity_;
  key += '\0';
  key += program;
  return (fs::path(directory_) / (fnv1a_128_hex(key) + kEntrySuffix)).string();
}

DiskLookup DiskCache::load(const std::string& program) {
  DiskLookup result;
  fs::path path = path_of(program);
  std::string bytes;
  if (!read_file(path, &bytes)) {
    std::error_code ec;
    if (fs::exists(path, ec)) {
      result.status = DiskLookup::Status::Rejected;
      result.why = "cannot read " + path.string();
      metrics().count_disk(DiskEvent::Corrupt);
    } else {
      result.status = DiskLookup::Status::Miss;
      metrics().count_disk(DiskEvent::Miss);
    }
    return result;
  }
  if (decode_entry(bytes, identity_, program, &result.payload, &result.why)) {
    result.status = DiskLookup::Status::Hit;
    return result;
  }
  result.status = DiskLookup::Status::Rejected;
  std::error_code ec;
  fs::remove(path, ec);
  metrics().count_disk(DiskEvent::Corrupt);
  return result;
}

void DiskCache::mark_used(const std::string& program) {
  std::error_code ec;
  fs::last_write_time(path_of(program), fs::file_time_type::clock::now(), ec);
  metrics().count_disk(DiskEvent::Hit);
}

void DiskCache::reject(const std::string& program) {
  std::error_code ec;
  fs::remove(path_of(program), ec);
  metrics().count_disk(DiskEvent::Corrupt);
}

void DiskCache::store(const std::string& program, const std::string& payload) {
  std::string entry = encode_entry(identity_, program, payload);
  fs::path path = path_of(program);
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) {
    warn_once("cannot create the compile cache directory '" + directory_ + "': " + ec.message());
    return;
  }
  std::string temp = temp_name(path);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(entry.data(), static_cast<std::streamsize>(entry.size()));
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      warn_once("cannot write to the compile cache directory '" + directory_ + "'");
      return;
    }
  }
  // rename() replaces atomically: concurrent writers of one key leave one whole entry.
  fs::rename(temp, path, ec);
  if (ec) {
    fs::remove(temp, ec);
    warn_once("cannot write to the compile cache directory '" + directory_ + "'");
    return;
  }
  metrics().count_disk(DiskEvent::Write);
  std::lock_guard<std::mutex> lock(mutex_);
  if (estimated_bytes_ >= 0) estimated_bytes_ += static_cast<int64_t>(entry.size());
  writes_since_scan_ += 1;
  if (estimated_bytes_ < 0 || estimated_bytes_ > max_bytes_ ||
      writes_since_scan_ >= kWritesPerScan) {
    evict_to_cap();
  }
}

void DiskCache::evict_to_cap() {
  std::vector<FileInfo> entries = scan(directory_);
  int64_t total = 0;
  for (const FileInfo& entry : entries) total += entry.bytes;
  if (total > max_bytes_) {
    std::sort(entries.begin(), entries.end(),
              [](const FileInfo& a, const FileInfo& b) { return a.used < b.used; });
    for (const FileInfo& entry : entries) {
      if (total <= max_bytes_) break;
      std::error_code ec;
      // Another process may have evicted it already: it is gone either way.
      if (fs::remove(entry.path, ec)) metrics().count_disk(DiskEvent::Eviction);
      total -= entry.bytes;
    }
  }
  estimated_bytes_ = total;
  writes_since_scan_ = 0;
}

DiskUsage DiskCache::usage() const {
  DiskUsage usage;
  for (const FileInfo& entry : scan(directory_)) {
    usage.entries += 1;
    usage.bytes += entry.bytes;
  }
  return usage;
}

void DiskCache::clear() {
  // Temporary files are left to their writers (scan() removes only dead writers' ones).
  for (const FileInfo& entry : scan(directory_)) {
    std::error_code ec;
    fs::remove(entry.path, ec);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  estimated_bytes_ = 0;
  writes_since_scan_ = 0;
}

}  // namespace tpu::runtime
