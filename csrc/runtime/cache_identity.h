#pragma once
// The part of a disk-cache key that is not the program: what must match for a
// serialized executable to be valid in this process. Serialized executables are only
// valid for the same plugin build, so the plugin is identified by its file too, not
// only by the versions it reports (the CPU plugin reports "cpu" and "2").
#include <string>

#include "pjrt/client.h"

namespace tpu::runtime {

// What a cache entry is compiled for: a client's devices, or a compile-only target's
// (which warms a cache for the platform that later runs it).
struct CacheTarget {
  const pjrt::Plugin& plugin;
  std::string platform_name;     // "cpu", "tpu", "cuda"
  std::string platform_version;  // part of the identity on the CPU platform only
  std::string device_kind;       // "TPU v6 lite", "NVIDIA H100 80GB HBM3"; not on cpu
};

// One "name=value" per line: platform, on cpu its version, elsewhere the device kind (the
// GPU plugin's executables do not tell an H100 program from a B200 one, and the plugin file
// already pins the build), PJRT C API version, plugin attributes, a fingerprint of the
// plugin file, compile options, torch_tpu's version.
std::string cache_identity(const CacheTarget& target, const std::string& torch_tpu_version);
// The identity of `client`'s devices (the kind of its first device).
std::string cache_identity(const pjrt::Client& client, const std::string& torch_tpu_version);

// "<size>:<hash>" of a file, hashing its first, middle and last 256 KiB: cheap even for
// a 300 MB plugin, the same for identical copies on different hosts.
std::string file_fingerprint(const std::string& path);

}  // namespace tpu::runtime
