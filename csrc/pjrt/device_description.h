#pragma once
// What a plugin says of one device, present (a client's) or described (a compile-only
// topology's): copied out of the plugin's memory, so it outlives its owner.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

struct DeviceInfo {
  int id = 0;
  std::string kind;         // e.g. "cpu", "TPU v5 lite", "TPU7x"
  std::string description;  // PJRT_DeviceDescription_ToString
  // The integer attributes the plugin reports (TPU: "coords" {x, y, z}, "core_on_chip",
  // "slice_index"...), scalars as one-element lists.
  std::map<std::string, std::vector<int64_t>> int_attributes;
};

// Reads `description` (owned by the plugin: a client's device or a topology).
DeviceInfo read_device_description(const PJRT_Api* api, PJRT_DeviceDescription* description);

}  // namespace tpu::pjrt
