#pragma once
// Serialized xla.CompileOptionsProto, written by hand (no protobuf dependency): the few
// shapes of options torch_tpu compiles with, and the one field it reads back.
#include <cstdint>
#include <string>
#include <vector>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

// Serialized xla.CompileOptionsProto: one replica, one partition, portable (the
// device is chosen at execution). The CPU plugin aborts on empty options, so every
// compile goes through this.
std::string portable_compile_options();

// Serialized xla.CompileOptionsProto for a program replicated over `device_ids` (PJRT
// device ids, replica r on device_ids[r]), one partition, not portable: the program of
// a collective, which each rank launches on its own device of the assignment.
std::string replicated_compile_options(const std::vector<int64_t>& device_ids);

// `options` (a serialized xla.CompileOptionsProto) with the XLA debug option `name` set
// to `value` for this compile only (CompileOptionsProto.env_option_overrides, which the
// plugin applies over its XLA_FLAGS defaults, so every other option keeps its value).
std::string with_option_override(std::string options, const std::string& name, int64_t value);
std::string with_option_override(std::string options, const std::string& name, bool value);
// The same for a string option (OptionOverrideProto.string_field), e.g. the GPU compiler's
// "xla_gpu_cuda_data_dir". Named apart so that a string literal cannot bind to the bool one.
std::string with_string_option_override(std::string options, const std::string& name,
                                        const std::string& value);

// The PJRT_Program of StableHLO text (format "mlir") for one compile call: it points into
// `mlir`, which must outlive it.
PJRT_Program mlir_program(const std::string& mlir);

// ExecutableBuildOptionsProto.num_replicas of serialized `options` (1 where unset or
// unreadable): how many devices a program compiled with them spans.
int64_t replica_count(const std::string& options);

}  // namespace tpu::pjrt
