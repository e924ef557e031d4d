#include "compile_options.h"

#include "error.h"

namespace tpu::pjrt {

namespace {
void append_varint(std::string* out, uint64_t value) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

}  // namespace

std::string portable_compile_options() {
  // ExecutableBuildOptionsProto: num_replicas (4) = 1, num_partitions (5) = 1.
  const std::string build("\x20\x01\x28\x01", 4);
  // CompileOptionsProto: executable_build_options (3), compile_portable_executable (4) = true.
  std::string options;
  options.push_back(0x1a);
  append_varint(&options, build.size());
  return options + build + std::string("\x20\x01", 2);
}

std::string replicated_compile_options(const std::vector<int64_t>& device_ids) {
  // DeviceAssignmentProto: replica_count (1), computation_count (2) = 1,
  // computation_devices (3) { replica_device_ids (1): the devices, packed }.
  std::string ids;
  for (int64_t id : device_ids) append_varint(&ids, static_cast<uint64_t>(id));
  std::string computation("\x0a", 1);
  append_varint(&computation, ids.size());
  computation += ids;
  std::string assignment("\x08", 1);
  append_varint(&assignment, device_ids.size());
  assignment += std::string("\x10\x01\x1a", 3);
  append_varint(&assignment, computation.size());
  assignment += computation;
  // ExecutableBuildOptionsProto: num_replicas (4), num_partitions (5) = 1,
  // device_assignment (9).
  std::string build("\x20", 1);
  append_varint(&build, device_ids.size());
  build += std::string("\x28\x01\x4a", 3);
  append_varint(&build, assignment.size());
  build += assignment;
  // CompileOptionsProto: executable_build_options (3); compile_portable_executable unset.
  std::string options("\x1a", 1);
  append_varint(&options, build.size());
  return options + build;
}

namespace {
// CompileOptionsProto.env_option_overrides (7) += {name: value}, where `value` is one
// serialized OptionOverrideProto field; appending a field to a message merges it.
std::string with_override_field(std::string options, const std::string& name,
                                const std::string& value) {
  std::string entry("\x0a", 1);  // the map entry's key (1)
  append_varint(&entry, name.size());
  entry += name;
  entry.push_back(0x12);  // its value (2)
  append_varint(&entry, value.size());
  entry += value;
  options.push_back(0x3a);
  append_varint(&options, entry.size());
  return options + entry;
}
}  // namespace

std::string with_option_override(std::string options, const std::string& name, int64_t value) {
  std::string field("\x18", 1);  // OptionOverrideProto.int_field (3)
  append_varint(&field, static_cast<uint64_t>(value));
  return with_override_field(std::move(options), name, field);
}

std::string with_option_override(std::string options, const std::string& name, bool value) {
  // OptionOverrideProto.bool_field (2).
  return with_override_field(std::move(options), name,
                             std::string{'\x10', value ? '\x01' : '\x00'});
}

std::string with_string_option_override(std::string options, const std::string& name,
                                        const std::string& value) {
  std::string field("\x0a", 1);  // OptionOverrideProto.string_field (1)
  append_varint(&field, value.size());
  field += value;
  return with_override_field(std::move(options), name, field);
}

namespace {
// A reader of the protobuf wire format, enough to walk the fields of one message.
struct WireReader {
  const std::string& bytes;
  size_t at = 0;

  bool varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64 && at < bytes.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(bytes[at++]);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  // The next field's number, wire type and (length-delimited) payload or (varint) value.
  bool field(uint32_t* number, uint32_t* type, std::string* payload, uint64_t* value) {
    uint64_t tag = 0;
    if (at >= bytes.size() || !varint(&tag)) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *type = static_cast<uint32_t>(tag & 7);
    switch (*type) {
      case 0: return varint(value);
      case 1: at += 8; return at <= bytes.size();
      case 2: {
        uint64_t size = 0;
        if (!varint(&size) || size > bytes.size() - at) return false;
        *payload = bytes.substr(at, size);
        at += size;
        return true;
      }
      case 5: at += 4; return at <= bytes.size();
      default: return false;
    }
  }
};

// The last value of varint field `wanted` in `message`, or `fallback`.
uint64_t varint_field(const std::string& message, uint32_t wanted, uint64_t fallback) {
  WireReader reader{message};
  uint32_t number = 0, type = 0;
  std::string payload;
  uint64_t value = 0;
  uint64_t found = fallback;
  while (reader.field(&number, &type, &payload, &value)) {
    if (number == wanted && type == 0) found = value;
  }
  return found;
}
}  // namespace

PJRT_Program mlir_program(const std::string& mlir) {
  static const char kFormat[] = "mlir";
  auto program = PJRT_ARGS(PJRT_Program);
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  return program;
}

int64_t replica_count(const std::string& options) {
  // CompileOptionsProto.executable_build_options (3) -> num_replicas (4). Repeated
  // occurrences of a message field merge, so the last num_replicas wins.
  WireReader reader{options};
  uint32_t number = 0, type = 0;
  std::string payload;
  uint64_t value = 0;
  uint64_t replicas = 1;
  while (reader.field(&number, &type, &payload, &value)) {
    if (number == 3 && type == 2) replicas = varint_field(payload, 4, replicas);
  }
  return replicas > 0 ? static_cast<int64_t>(replicas) : 1;
}

}  // namespace tpu::pjrt
