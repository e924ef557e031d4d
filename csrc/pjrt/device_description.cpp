#include "device_description.h"

#include <variant>

#include "error.h"
#include "named_value.h"

namespace tpu::pjrt {

namespace {
std::string device_description_string(const PJRT_Api* api, PJRT_DeviceDescription* description,
                                      bool kind) {
  if (kind) {
    auto args = PJRT_ARGS(PJRT_DeviceDescription_Kind_Args);
    args.device_description = description;
    check(api, api->PJRT_DeviceDescription_Kind(&args), "PJRT_DeviceDescription_Kind");
    return std::string(args.device_kind, args.device_kind_size);
  }
  auto args = PJRT_ARGS(PJRT_DeviceDescription_ToString_Args);
  args.device_description = description;
  check(api, api->PJRT_DeviceDescription_ToString(&args), "PJRT_DeviceDescription_ToString");
  return std::string(args.to_string, args.to_string_size);
}
}  // namespace

DeviceInfo read_device_description(const PJRT_Api* api, PJRT_DeviceDescription* description) {
  auto id = PJRT_ARGS(PJRT_DeviceDescription_Id_Args);
  id.device_description = description;
  check(api, api->PJRT_DeviceDescription_Id(&id), "PJRT_DeviceDescription_Id");
  DeviceInfo info;
  info.id = id.id;
  info.kind = device_description_string(api, description, true);
  info.description = device_description_string(api, description, false);
  auto attributes = PJRT_ARGS(PJRT_DeviceDescription_Attributes_Args);
  attributes.device_description = description;
  check(api, api->PJRT_DeviceDescription_Attributes(&attributes),
        "PJRT_DeviceDescription_Attributes");
  for (NamedValue& value : read_named_values(attributes.attributes, attributes.num_attributes)) {
    if (const auto* scalar = std::get_if<int64_t>(&value.value)) {
      info.int_attributes[value.name] = {*scalar};
    } else if (auto* list = std::get_if<std::vector<int64_t>>(&value.value)) {
      info.int_attributes[value.name] = std::move(*list);
    }
  }
  return info;
}

}  // namespace tpu::pjrt
