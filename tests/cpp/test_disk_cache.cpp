// The disk cache: entry format, validation, eviction, settings, and the program cache
// reading and filling it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "hlo/builder.h"
#include "plugin_path.h"
#include "runtime/cache_entry.h"
#include "runtime/cache_identity.h"
#include "runtime/disk_cache.h"
#include "runtime/fingerprint.h"
#include "runtime/metrics.h"
#include "runtime/program_cache.h"
#include "runtime/recompile_log.h"

namespace tpu::runtime {
namespace {

namespace fs = std::filesystem;
using tpu::testing::shared_client;

// A fresh directory, removed with everything in it when the test ends.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "tpu_disk_cache_XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

const std::string kIdentity = "platform=test\nplatform_version=1\ntorch_tpu=0.1.0\n";
const std::string kProgram = "module @torch_tpu { ... }\n";

TEST(Fingerprint, MatchesTheFnvReferenceValues) {
  EXPECT_EQ(fnv1a_64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a_64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a_128_hex(""), "6c62272e07bb014262b821756295c58d");
  EXPECT_EQ(fnv1a_128_hex("a"), "d228cb696f1a8caf78912b704e4a8964");
}

TEST(CacheEntry, RoundTripsAndRejectsEveryDamage) {
  std::string entry = encode_entry(kIdentity, kProgram, "PAYLOAD");
  std::string payload, why;
  ASSERT_TRUE(decode_entry(entry, kIdentity, kProgram, &payload, &why)) << why;
  EXPECT_EQ(payload, "PAYLOAD");

  auto rejects = [&](const std::string& bytes, const std::string& identity,
                     const std::string& program, const std::string& reason) {
    std::string out, because;
    EXPECT_FALSE(decode_entry(bytes, identity, program, &out, &because));
    EXPECT_NE(because.find(reason), std::string::npos) << because;
  };
  rejects("garbage", kIdentity, kProgram, "not a torch_tpu cache entry");
  rejects(entry.substr(0, entry.size() - 1), kIdentity, kProgram, "truncated");
  rejects(entry.substr(0, 20), kIdentity, kProgram, "not a torch_tpu cache entry");
  rejects(entry + "x", kIdentity, kProgram, "truncated or padded");
  std::string flipped = entry;
  flipped[flipped.size() - 3] ^= 0x10;
  rejects(flipped, kIdentity, kProgram, "checksum");
  std::string newer = entry;
  newer[8] = 2;
  rejects(newer, kIdentity, kProgram, "entry format 2");
  std::string other = "platform=test\nplatform_version=2\ntorch_tpu=0.1.0\n";
  rejects(entry, other, kProgram, "this process has platform_version=2");
  rejects(entry, kIdentity, kProgram + " ", "another program");
}

TEST(DiskCache, StoresAndLoads) {
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kIdentity);
  int64_t writes = metrics().snapshot().disk_writes;
  int64_t misses = metrics().snapshot().disk_misses;
  EXPECT_EQ(cache.load(kProgram).status, DiskLookup::Status::Miss);
  cache.store(kProgram, "PAYLOAD");
  DiskLookup found = DiskCache(dir.path(), 1 << 20, kIdentity).load(kProgram);
  EXPECT_EQ(found.status, DiskLookup::Status::Hit);
  EXPECT_EQ(found.payload, "PAYLOAD");
  EXPECT_EQ(metrics().snapshot().disk_writes - writes, 1);
  EXPECT_EQ(metrics().snapshot().disk_misses - misses, 1);
  EXPECT_EQ(cache.usage().entries, 1);
  // Only the entry is in the directory: the temporary file was renamed into place.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(DiskCache, BadEntriesAreRejectedDeletedAndCounted) {
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kIdentity);
  std::string path = cache.path_of(kProgram);
  std::string other_identity = "platform=test\nplatform_version=2\ntorch_tpu=0.1.0\n";
  cache.store(kProgram, "PAYLOAD");
  std::string good = read_all(path);
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x01;
  for (const std::string& bad : {flipped, good.substr(0, good.size() - 4), std::string("junk"),
                                 encode_entry(other_identity, kProgram, "PAYLOAD")}) {
    write_all(path, bad);
    int64_t corrupt = metrics().snapshot().disk_corrupt;
    DiskLookup found = cache.load(kProgram);
    EXPECT_EQ(found.status, DiskLookup::Status::Rejected);
    EXPECT_FALSE(found.why.empty());
    EXPECT_EQ(metrics().snapshot().disk_corrupt - corrupt, 1);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(cache.load(kProgram).status, DiskLookup::Status::Miss);
  }
}

TEST(DiskCache, ForeignIdentitiesUseOtherFiles) {
  TempDir dir;
  DiskCache ours(dir.path(), 1 << 20, kIdentity);
  DiskCache theirs(dir.path(), 1 << 20, "platform=other\n");
  EXPECT_NE(ours.path_of(kProgram), theirs.path_of(kProgram));
  theirs.store(kProgram, "THEIRS");
  EXPECT_EQ(ours.load(kProgram).status, DiskLookup::Status::Miss);
  ours.store(kProgram, "OURS");
  EXPECT_EQ(theirs.load(kProgram).payload, "THEIRS");
  EXPECT_EQ(ours.load(kProgram).payload, "OURS");
}

TEST(DiskCache, EvictsLeastRecentlyUsedBeyondTheCap) {
  TempDir dir;
  std::string payload(1000, 'p');
  int64_t entry_bytes = static_cast<int64_t>(encode_entry(kIdentity, "a", payload).size());
  DiskCache cache(dir.path(), entry_bytes * 2 + entry_bytes / 2, kIdentity);  // room for two
  cache.store("a", payload);
  cache.store("b", payload);
  auto now = fs::file_time_type::clock::now();
  fs::last_write_time(cache.path_of("a"), now - std::chrono::seconds(200));
  fs::last_write_time(cache.path_of("b"), now - std::chrono::seconds(100));
  cache.mark_used("a");  // a hit makes "a" the most recently used
  int64_t evictions = metrics().snapshot().disk_evictions;
  cache.store("c", payload);
  EXPECT_TRUE(fs::exists(cache.path_of("a")));
  EXPECT_FALSE(fs::exists(cache.path_of("b")));
  EXPECT_TRUE(fs::exists(cache.path_of("c")));
  EXPECT_EQ(metrics().snapshot().disk_evictions - evictions, 1);
  EXPECT_LE(cache.usage().bytes, cache.max_bytes());
}

TEST(DiskCache, ClearRemovesOnlyEntries) {
  TempDir dir;
  DiskCache cache(dir.path(), 1 << 20, kIdentity);
  cache.store("a", "1");
  cache.store("b", "2");
  write_all(dir.path() + "/notes.txt", "not ours");
  cache.clear();
  EXPECT_EQ(cache.usage().entries, 0);
  EXPECT_TRUE(fs::exists(dir.path() + "/notes.txt"));
}

TEST(DiskCache, UnwritableDirectoryIsNotAnError) {
  TempDir dir;
  write_all(dir.path() + "/file", "x");
  DiskCache cache(dir.path() + "/file/sub", 1 << 20, kIdentity);  // a file blocks the path
  EXPECT_NO_THROW(cache.store(kProgram, "PAYLOAD"));
  EXPECT_EQ(cache.load(kProgram).status, DiskLookup::Status::Miss);
}

TEST(DiskCacheSettings, ParsesSizesAndTheEnvironment) {
  EXPECT_EQ(parse_byte_size("100"), 100);
  EXPECT_EQ(parse_byte_size("512m"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("2G"), int64_t{2} << 30);
  for (const char* bad : {"", "abc", "0", "-5", "1X", "2GB", "99999999999T"}) {
    EXPECT_THROW(parse_byte_size(bad), std::invalid_argument) << bad;
  }
  const char* saved = std::getenv("TORCH_TPU_CACHE_DIR");
  std::string restore = saved ? saved : "";
  ::setenv("TORCH_TPU_CACHE_DIR", "off", 1);
  EXPECT_EQ(DiskCacheSettings::from_environment().directory, "");
  ::setenv("TORCH_TPU_CACHE_DIR", "", 1);
  EXPECT_EQ(DiskCacheSettings::from_environment().directory, "");
  ::setenv("TORCH_TPU_CACHE_DIR", "/some/dir", 1);
  EXPECT_EQ(DiskCacheSettings::from_environment().directory, "/some/dir");
  ::unsetenv("TORCH_TPU_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(DiskCacheSettings::from_environment().directory, "/xdg/torch_tpu");
  ::unsetenv("XDG_CACHE_HOME");
  if (saved) ::setenv("TORCH_TPU_CACHE_DIR", restore.c_str(), 1);
}

std::string negate_program(int64_t n) {
  hlo::Builder b;
  hlo::Value x = b.parameter(hlo::TensorType{hlo::ElementType::F32, {n}});
  return b.module_text({b.unary("negate", x)});
}

float run_negate(pjrt::Executable& executable, float value) {
  auto input = shared_client().buffer_from_host(&value, PJRT_Buffer_Type_F32, {1}, 0);
  auto outputs = executable.execute({input->get()}, shared_client().device(0));
  float out = 0;
  outputs[0]->to_host(&out, sizeof out);
  return out;
}

TEST(ProgramCacheOnDisk, ASecondProcessLoadsInsteadOfCompiling) {
  TempDir dir;
  std::string identity = cache_identity(shared_client(), "test");
  std::string text = negate_program(1);
  ProgramCache first(shared_client());
  first.set_disk_cache(std::make_shared<DiskCache>(dir.path(), 1 << 30, identity));
  first.get(text);

  ProgramCache second(shared_client());  // a restarted process: empty memory, same disk
  second.set_disk_cache(std::make_shared<DiskCache>(dir.path(), 1 << 30, identity));
  MetricsSnapshot before = metrics().snapshot();
  auto executable = second.get(text);
  MetricsSnapshot after = metrics().snapshot();
  EXPECT_EQ(after.compiles - before.compiles, 0);
  EXPECT_EQ(after.disk_hits - before.disk_hits, 1);
  EXPECT_EQ(run_negate(*executable, 2.5f), -2.5f);
}

TEST(ProgramCacheOnDisk, AnUnloadableEntryIsRecompiledAndReplaced) {
  TempDir dir;
  auto disk =
      std::make_shared<DiskCache>(dir.path(), 1 << 30, cache_identity(shared_client(), "test"));
  std::string text = negate_program(1);
  disk->store(text, "intact bytes, but not an executable");
  ProgramCache cache(shared_client());
  cache.set_disk_cache(disk);
  MetricsSnapshot before = metrics().snapshot();
  auto executable = cache.get(text);
  MetricsSnapshot after = metrics().snapshot();
  EXPECT_EQ(after.compiles - before.compiles, 1);
  EXPECT_EQ(after.disk_corrupt - before.disk_corrupt, 1);
  EXPECT_EQ(run_negate(*executable, 4.0f), -4.0f);
  DiskLookup found = disk->load(text);
  ASSERT_EQ(found.status, DiskLookup::Status::Hit);
  EXPECT_NO_THROW(shared_client().deserialize(found.payload));
}

TEST(CacheIdentity, NamesThePluginAndVersions) {
  std::string identity = cache_identity(shared_client(), "9.9.9");
  EXPECT_NE(identity.find("platform=" + shared_client().platform_name() + "\n"), std::string::npos);
  EXPECT_NE(identity.find("plugin_file="), std::string::npos);
  EXPECT_NE(identity.find("torch_tpu=9.9.9\n"), std::string::npos);
  EXPECT_NE(identity, cache_identity(shared_client(), "9.9.10"));
}

TEST(RecompileLog, ExplainsWhatChanged) {
  std::string three = negate_program(3);
  EXPECT_EQ(explain_compile({}, three), "new op");
  std::string why = explain_compile({three}, negate_program(4));
  EXPECT_NE(why.find("new shapes, dtypes or layout"), std::string::npos) << why;
  EXPECT_NE(why.find("tensor<3xf32> -> tensor<4xf32>"), std::string::npos) << why;

  hlo::Builder b;
  hlo::Value x = b.parameter(hlo::TensorType{hlo::ElementType::F32, {3}});
  std::string abs = b.module_text({b.unary("abs", x)});
  why = explain_compile({negate_program(5), three}, abs);  // nearest: same signature
  EXPECT_NE(why.find("new graph structure"), std::string::npos) << why;
  EXPECT_NE(why.find("abs"), std::string::npos) << why;
  EXPECT_NE(why.find("negate"), std::string::npos) << why;
}

}  // namespace
}  // namespace tpu::runtime
