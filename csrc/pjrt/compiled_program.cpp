#include "compiled_program.h"

#include <variant>

#include "error.h"
#include "named_value.h"

namespace tpu::pjrt {

CompiledProgram::CompiledProgram(std::shared_ptr<const Plugin> plugin, PJRT_Executable* executable)
    : plugin_(std::move(plugin)), executable_(executable) {}

CompiledProgram::~CompiledProgram() {
  auto args = PJRT_ARGS(PJRT_Executable_Destroy_Args);
  args.executable = executable_;
  PJRT_Error* error = plugin_->api()->PJRT_Executable_Destroy(&args);
  if (error != nullptr) take_message(plugin_->api(), error);  // a destructor must not throw
}

std::optional<CompiledMemory> CompiledProgram::memory() const {
  const PJRT_Api* api = plugin_->api();
  if (!PJRT_HAS(*plugin_, PJRT_Executable_GetCompiledMemoryStats)) return std::nullopt;
  auto args = PJRT_ARGS(PJRT_Executable_GetCompiledMemoryStats_Args);
  args.executable = executable_;
  if (PJRT_Error* error = api->PJRT_Executable_GetCompiledMemoryStats(&args)) {
    take_message(api, error);  // unimplemented by this plugin: no figures
    return std::nullopt;
  }
  CompiledMemory memory;
  memory.code = args.generated_code_size_in_bytes;
  memory.arguments = args.argument_size_in_bytes;
  memory.outputs = args.output_size_in_bytes;
  memory.aliased = args.alias_size_in_bytes;
  memory.temporaries = args.temp_size_in_bytes;
  return memory;
}

std::map<std::string, double> CompiledProgram::cost_analysis() const {
  std::map<std::string, double> costs;
  const PJRT_Api* api = plugin_->api();
  if (!PJRT_HAS(*plugin_, PJRT_Executable_GetCostAnalysis)) return costs;
  auto args = PJRT_ARGS(PJRT_Executable_GetCostAnalysis_Args);
  args.executable = executable_;
  if (PJRT_Error* error = api->PJRT_Executable_GetCostAnalysis(&args)) {
    take_message(api, error);  // UNIMPLEMENTED on the GPU plugin
    return costs;
  }
  for (const NamedValue& value : read_named_values(args.properties, args.num_properties)) {
    if (const auto* number = std::get_if<double>(&value.value)) {
      costs[value.name] = *number;
    } else if (const auto* integer = std::get_if<int64_t>(&value.value)) {
      costs[value.name] = static_cast<double>(*integer);
    }
  }
  return costs;
}

std::string CompiledProgram::serialize() const {
  return serialize_executable(plugin_->api(), executable_);
}

std::string serialize_executable(const PJRT_Api* api, PJRT_Executable* executable) {
  auto args = PJRT_ARGS(PJRT_Executable_Serialize_Args);
  args.executable = executable;
  check(api, api->PJRT_Executable_Serialize(&args), "PJRT_Executable_Serialize");
  // The bytes live until the deleter runs: freed even if copying them throws.
  struct Deleter {
    PJRT_SerializedExecutable* executable;
    void (*deleter)(PJRT_SerializedExecutable*);
    ~Deleter() {
      if (deleter != nullptr) deleter(executable);
    }
  } owner{args.serialized_executable, args.serialized_executable_deleter};
  return std::string(args.serialized_bytes, args.serialized_bytes_size);
}

}  // namespace tpu::pjrt
