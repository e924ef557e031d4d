#pragma once
// A program compiled for a compile-only target (Topology::compile): an executable that is
// not loaded on any device and never runs. What it is good for: the compiler's memory
// figures and cost analysis, and its serialized bytes for a cache the real platform loads.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "plugin.h"

namespace tpu::pjrt {

// xla::CompiledMemoryStats of one device's share of a program, in bytes.
struct CompiledMemory {
  int64_t code = 0;
  int64_t arguments = 0;
  int64_t outputs = 0;
  int64_t aliased = 0;  // the part of `outputs` that reuses argument buffers
  int64_t temporaries = 0;
  // What the device must hold while it runs: arguments + outputs - aliased + temporaries
  // + code (the plugins' own peak figure is not reported by every version).
  int64_t peak() const { return arguments + outputs - aliased + temporaries + code; }
};

class CompiledProgram {
 public:
  // Takes ownership of `executable` (PJRT_Executable_Destroy when this dies).
  CompiledProgram(std::shared_ptr<const Plugin> plugin, PJRT_Executable* executable);
  ~CompiledProgram();
  CompiledProgram(const CompiledProgram&) = delete;
  CompiledProgram& operator=(const CompiledProgram&) = delete;

  // The compiler's memory figures; nothing where the plugin does not report them.
  std::optional<CompiledMemory> memory() const;
  // The compiler's cost analysis ("flops", "bytes accessed", "transcendentals", ...),
  // numbers only; empty where the plugin does not implement it (the GPU plugin).
  std::map<std::string, double> cost_analysis() const;
  // Bytes a client of the same plugin build loads with PJRT_Executable_DeserializeAndLoad.
  std::string serialize() const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_Executable* executable_;
};

// PJRT_Executable_Serialize of `executable` (not owned), copied out.
std::string serialize_executable(const PJRT_Api* api, PJRT_Executable* executable);

}  // namespace tpu::pjrt
