#pragma once
// The part of a disk-cache key that is not the program: what must match for a
// serialized executable to be valid in this process. Serialized executables are only
// valid for the same plugin build, so the plugin is identified by its file too, not
// only by the versions it reports (the CPU plugin reports "cpu" and "2").
#include <string>

#include "pjrt/client.h"

namespace tpu::runtime {

// One "name=value" per line: platform, platform version, PJRT C API version, plugin
// attributes, a fingerprint of the plugin file, compile options, torch_tpu's version.
std::string cache_identity(const pjrt::Client& client, const std::string& torch_tpu_version);

// "<size>:<hash>" of a file, hashing its first, middle and last 256 KiB: cheap even for
// a 300 MB plugin, the same for identical copies on different hosts.
std::string file_fingerprint(const std::string& path);

}  // namespace tpu::runtime
