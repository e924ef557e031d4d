#include "runtime/cache_identity.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "runtime/compile_parallelism.h"
#include "runtime/fingerprint.h"
#include "runtime/program_cache.h"
#include "runtime/xla_cpu_shortcuts.h"

namespace tpu::runtime {

namespace {

std::string hex(const std::string& bytes) {
  std::string out;
  char digits[3];
  for (unsigned char c : bytes) {
    std::snprintf(digits, sizeof digits, "%02x", c);
    out += digits;
  }
  return out;
}

}  // namespace

std::string file_fingerprint(const std::string& path) {
  constexpr std::streamoff kSample = 256 * 1024;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "unreadable";
  std::streamoff size = in.tellg();
  std::string samples;
  for (std::streamoff at : {std::streamoff{0}, size / 2, size - kSample}) {
    at = std::max<std::streamoff>(0, std::min(at, size));
    std::string chunk(static_cast<size_t>(std::min(kSample, size - at)), '\0');
    in.seekg(at);
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    samples += chunk;
  }
  return std::to_string(size) + ":" + fnv1a_128_hex(samples);
}

std::string cache_identity(const pjrt::Client& client, const std::string& torch_tpu_version) {
  CacheTarget target{client.plugin(), client.platform_name(), client.platform_version(), ""};
  if (client.platform_name() != "cpu" && client.device_count() > 0) {
    target.device_kind = client.device_info(0).kind;
  }
  return cache_identity(target, torch_tpu_version);
}

std::string cache_identity(const CacheTarget& target, const std::string& torch_tpu_version) {
  const pjrt::Plugin& plugin = target.plugin;
  const bool cpu = target.platform_name == "cpu";
  std::string identity;
  identity += "platform=" + target.platform_name + "\n";
  if (cpu) {
    identity += "platform_version=" + target.platform_version + "\n";
  } else {
    identity += "device_kind=" + target.device_kind + "\n";
  }
  identity += "pjrt_api=" + std::to_string(plugin.api_major()) + "." +
              std::to_string(plugin.api_minor()) + "\n";
  for (const auto& [name, value] : plugin.attributes()) {
    identity += "plugin." + name + "=" + value + "\n";
  }
  identity += "plugin_file=" + file_fingerprint(plugin.path()) + "\n";
  const std::string& platform = target.platform_name;
  identity += "op_compile_options=" + hex(compile_options_for(platform, ProgramKind::Op)) + "\n";
  identity +=
      "graph_compile_options=" + hex(compile_options_for(platform, ProgramKind::Graph)) + "\n";
  identity +=
      "quick_op_compile_options=" + hex(compile_options_for(platform, ProgramKind::QuickOp)) + "\n";
  // Programs compiled for one core hold other code: they must not be mixed with others.
  if (xla_cpu_shortcuts(target.platform_name) && one_core_compile_requested()) {
    identity += "one_core_compile=1\n";
  }
  identity += "torch_tpu=" + torch_tpu_version + "\n";
  // The plugins read their compiler flags from these, and flags change the code
  // compiled (fast math, vector width...): a program compiled under other flags
  // must not be reused.
  for (const char* variable : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* value = std::getenv(variable);
    identity += std::string(variable) + "=" + (value != nullptr ? value : "") + "\n";
  }
  return identity;
}

}  // namespace tpu::runtime
