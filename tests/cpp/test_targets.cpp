// Compile-only targets (csrc/pjrt/topology.h, runtime/target_check.h): compile options read
// back, topologies of libtpu's chips without a TPU, compiling for them, checking programs for
// them and warming a cache. The libtpu tests need PyPI's libtpu (scripts/setup.sh --test),
// found at configure time; without it they say so and skip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pjrt/compile_options.h"
#include "pjrt/error.h"
#include "pjrt/topology.h"
#include "runtime/cache_identity.h"
#include "runtime/compile_errors.h"
#include "runtime/disk_cache.h"
#include "runtime/target_check.h"

namespace tpu::pjrt {
namespace {

const char* kAddAndSum = R"(
module @m {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %c = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %1 = "stablehlo.reduce"(%0, %c) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    "func.return"(%0, %1) : (tensor<4xf32>, tensor<f32>) -> ()
  }
}
)";

// An all-reduce over every replica: the program of a collective.
const char* kAllReduce = R"(
module @m {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<8xf32>) -> tensor<8xf32>
    "func.return"(%0) : (tensor<8xf32>) -> ()
  }
}
)";

TEST(CompileOptions, ReplicaCountReadsBackWhatWasWritten) {
  EXPECT_EQ(replica_count(portable_compile_options()), 1);
  EXPECT_EQ(replica_count(replicated_compile_options({0, 1, 2, 3})), 4);
  EXPECT_EQ(replica_count(replicated_compile_options({5, 300})), 2);
  // Overrides appended after the build options leave them readable.
  std::string options = with_string_option_override(replicated_compile_options({0, 1, 2}),
                                                    "xla_gpu_cuda_data_dir", "/x/cu13");
  options = with_option_override(options, "xla_dump_to_nowhere", true);
  EXPECT_EQ(replica_count(options), 3);
  EXPECT_NE(options.find("/x/cu13"), std::string::npos);
  EXPECT_EQ(replica_count(""), 1);
  EXPECT_EQ(replica_count(std::string("\x1a\x7f", 2)), 1);  // truncated: unreadable, not a crash
}

std::string libtpu_path() {
#ifdef TORCH_TPU_TEST_LIBTPU
  return TORCH_TPU_TEST_LIBTPU;
#else
  return "";
#endif
}

// libtpu, loaded once for the binary with compile-only settings (no metadata queries, no
// one-process lock), or null where it is not installed.
std::shared_ptr<const Plugin> libtpu() {
  static std::shared_ptr<const Plugin> plugin = []() -> std::shared_ptr<const Plugin> {
    if (libtpu_path().empty()) return nullptr;
    setenv("TPU_SKIP_MDS_QUERY", "1", 0);
    setenv("ALLOW_MULTIPLE_LIBTPU_LOAD", "1", 0);
    // What libtpu would otherwise look for, and log that it did not find, on a TPU VM.
    setenv("TPU_WORKER_HOSTNAMES", "localhost", 0);
    setenv("TPU_ACCELERATOR_TYPE", "v6e-1", 0);
    return Plugin::load(libtpu_path());
  }();
  return plugin;
}

#define REQUIRE_LIBTPU()                                  \
  if (::tpu::pjrt::libtpu() == nullptr)                   \
  GTEST_SKIP() << "libtpu is not installed (pip install " \
                  "libtpu==0.0.51, scripts/setup.sh --test)"

TEST(Topology, TpuTopologyDescribesItsDevicesWithCoordinates) {
  REQUIRE_LIBTPU();
  Topology topology(libtpu(), "v5e:2x2");
  EXPECT_EQ(topology.platform_name(), "tpu");
  ASSERT_EQ(topology.devices().size(), 4u);
  std::set<std::vector<int64_t>> coords;
  for (const DeviceInfo& device : topology.devices()) {
    EXPECT_EQ(device.kind, "TPU v5 lite");
    ASSERT_TRUE(device.int_attributes.count("coords"));
    coords.insert(device.int_attributes.at("coords"));
  }
  std::set<std::vector<int64_t>> expected{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}};
  EXPECT_EQ(coords, expected);
}

TEST(Topology, TwoCoresAChipAreTwoDevicesAtOneCoordinate) {
  REQUIRE_LIBTPU();
  Topology topology(libtpu(), "tpu7x:2x2x1");
  ASSERT_EQ(topology.devices().size(), 8u);
  std::map<std::vector<int64_t>, std::set<int64_t>> cores;
  for (const DeviceInfo& device : topology.devices()) {
    cores[device.int_attributes.at("coords")].insert(device.int_attributes.at("core_on_chip")[0]);
  }
  EXPECT_EQ(cores.size(), 4u);
  for (const auto& [where, on_chip] : cores) EXPECT_EQ(on_chip, (std::set<int64_t>{0, 1}));
}

TEST(Topology, AnUnknownNameIsThePluginsErrorNamingIt) {
  REQUIRE_LIBTPU();
  try {
    Topology topology(libtpu(), "v99:2x2");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("v99:2x2"), std::string::npos) << error.what();
  }
}

TEST(Topology, CompilesWithoutADeviceAndReportsMemoryAndCosts) {
  REQUIRE_LIBTPU();
  Topology topology(libtpu(), "v6e:1x1");
  auto program = topology.compile(kAddAndSum, portable_compile_options());
  auto memory = program->memory();
  ASSERT_TRUE(memory.has_value());
  EXPECT_GE(memory->arguments, 2 * 4 * 4);  // two f32[4], in the chip's tiled layout
  EXPECT_GE(memory->outputs, 4 * 4 + 4);
  EXPECT_GT(memory->peak(), memory->arguments);
  auto costs = program->cost_analysis();
  ASSERT_TRUE(costs.count("flops"));
  EXPECT_GE(costs["flops"], 4);  // four adds, three more to sum
  EXPECT_GT(costs["bytes accessed"], 0);
  EXPECT_GT(program->serialize().size(), 100u);
}

TEST(Topology, ARefusedProgramIsAnErrorNamingTheTarget) {
  REQUIRE_LIBTPU();
  Topology topology(libtpu(), "v6e:1x1");
  try {
    topology.compile("module { this is not stablehlo }", portable_compile_options());
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("compiling for v6e:1x1 failed"), std::string::npos)
        << error.what();
  }
}

TEST(Topology, ACollectiveCompilesOverTheTopologysDevices) {
  REQUIRE_LIBTPU();
  Topology topology(libtpu(), "v5e:2x2");
  std::vector<int64_t> ids;
  for (const DeviceInfo& device : topology.devices()) ids.push_back(device.id);
  auto program = topology.compile(kAllReduce, replicated_compile_options(ids));
  ASSERT_TRUE(program->memory().has_value());
  EXPECT_GE(program->memory()->arguments, 8 * 4);  // one device's share
}

}  // namespace
}  // namespace tpu::pjrt

namespace tpu::runtime {
namespace {

TEST(CompileErrors, A64BitRefusalNamesTheOpTypesAndPlatform) {
  const std::string program = "func.func @main(%a: tensor<4x4xf64>) -> tensor<4x4xf64>";
  const std::string said = explain_compile_error(
      "aten::linalg_cholesky_ex", "tpu", program,
      "UNIMPLEMENTED: While rewriting computation to not contain X64 element types, XLA "
      "encountered an HLO for which this rewriting is not implemented");
  EXPECT_EQ(said.rfind("aten::linalg_cholesky_ex in float64 cannot be compiled for tpu", 0), 0u)
      << said;
  EXPECT_NE(said.find("float32"), std::string::npos);        // what to do instead
  EXPECT_NE(said.find("UNIMPLEMENTED"), std::string::npos);  // the compiler's own words
  // Any other refusal keeps the compiler's message, prefixed with the op.
  EXPECT_EQ(explain_compile_error("aten::add", "tpu", program, "bad"), "aten::add: bad");
}

TEST(TargetCheck, ChecksEachDistinctProgramOnceForEveryTarget) {
  REQUIRE_LIBTPU();
  auto small = std::make_shared<pjrt::Topology>(pjrt::libtpu(), "v6e:1x1");
  auto slice = std::make_shared<pjrt::Topology>(pjrt::libtpu(), "v5e:2x2");
  TargetCheck check;
  check.set_targets({TargetSpec{"v6e:1x1", small, "", "", "", nullptr},
                     TargetSpec{"v5e:2x2", slice, "", "", "", nullptr}});
  const std::string portable = pjrt::portable_compile_options();
  check.submit(pjrt::kAddAndSum, "aten::add", portable, "");
  check.submit(pjrt::kAddAndSum, "aten::add", portable, "");  // the same program: one more use
  check.submit(pjrt::kAllReduce, "c10d::allreduce_", pjrt::replicated_compile_options({0, 1, 2, 3}),
               "");
  check.submit("module { not a program }", "broken", portable, "/tmp/dump/00003-broken.mlir");
  std::vector<TargetResult> results = check.results();
  ASSERT_EQ(results.size(), 6u);  // three programs x two targets
  std::map<std::pair<std::string, std::string>, TargetResult> by_key;
  for (const TargetResult& r : results) by_key[{r.target, r.label}] = r;
  auto by = [&](const std::string& target, const std::string& label) -> const TargetResult& {
    return by_key[std::make_pair(target, label)];
  };
  EXPECT_TRUE(by("v6e:1x1", "aten::add").compiled);
  EXPECT_EQ(by("v6e:1x1", "aten::add").uses, 2);
  EXPECT_TRUE(by("v6e:1x1", "aten::add").costs.count("flops"));
  // The collective spans 4 devices: v6e:1x1 has one, v5e:2x2 four.
  EXPECT_FALSE(by("v6e:1x1", "c10d::allreduce_").compiled);
  EXPECT_NE(by("v6e:1x1", "c10d::allreduce_").error.find("spans 4 devices"), std::string::npos);
  EXPECT_TRUE(by("v5e:2x2", "c10d::allreduce_").compiled)
      << by("v5e:2x2", "c10d::allreduce_").error;
  EXPECT_EQ(by("v5e:2x2", "c10d::allreduce_").replicas, 4);
  const TargetResult& broken = by("v5e:2x2", "broken");
  EXPECT_FALSE(broken.compiled);
  EXPECT_NE(broken.error.find("compiling for v5e:2x2 failed"), std::string::npos);
  EXPECT_EQ(broken.dump_path, "/tmp/dump/00003-broken.mlir");
  check.set_targets({});
  EXPECT_FALSE(check.active());
  check.submit(pjrt::kAddAndSum, "ignored", portable, "");  // inactive: nothing queued
  EXPECT_EQ(check.pending(), 0u);
}

TEST(TargetCheck, WarmsACacheUnderTheKeyTheTargetsRuntimeLooksUp) {
  REQUIRE_LIBTPU();
  auto topology = std::make_shared<pjrt::Topology>(pjrt::libtpu(), "v6e:1x1");
  const std::string folder =
      (std::filesystem::temp_directory_path() / "torch_tpu_warm_cache_test").string();
  std::filesystem::remove_all(folder);
  CacheTarget target{topology->plugin(), topology->platform_name(), topology->platform_version(),
                     topology->devices()[0].kind};
  const std::string identity = cache_identity(target, "test");
  EXPECT_NE(identity.find("device_kind=TPU v6 lite"), std::string::npos) << identity;
  TargetCheck check;
  check.set_targets({TargetSpec{"v6e:1x1", topology, "", "", "",
                                std::make_shared<DiskCache>(folder, int64_t{1} << 30, identity)}});
  check.submit(pjrt::kAddAndSum, "aten::add", pjrt::portable_compile_options(), "");
  ASSERT_TRUE(check.results().at(0).compiled);
  check.set_targets({});
  // What a v6e runtime with the same identity finds: the entry, under the program's text.
  DiskCache on_the_tpu(folder, int64_t{1} << 30, identity);
  EXPECT_EQ(on_the_tpu.load(pjrt::kAddAndSum).status, DiskLookup::Status::Hit);
  // Another chip's runtime does not.
  CacheTarget other = target;
  other.device_kind = "TPU v5 lite";
  DiskCache on_a_v5e(folder, int64_t{1} << 30, cache_identity(other, "test"));
  EXPECT_EQ(on_a_v5e.load(pjrt::kAddAndSum).status, DiskLookup::Status::Miss);
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace tpu::runtime
