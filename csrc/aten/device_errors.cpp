#include "aten/device_errors.h"

#include <c10/util/Exception.h>

namespace tpu::aten {

void throw_device_out_of_memory(c10::DeviceIndex device, const std::string& message) {
  if (device < 0) TORCH_CHECK_WITH(OutOfMemoryError, false, message);  // already complete
  runtime::MemoryStats s = runtime::memory().stats(device);
  std::string name = "tpu:" + std::to_string(device);
  std::string cause = message;
  while (!cause.empty() && (cause.back() == '.' || cause.back() == ' ')) cause.pop_back();
  // The plugin's own temporaries and program buffers are not tensor storages, so the
  // plugin can run out before the tensors reach the capacity.
  TORCH_CHECK_WITH(OutOfMemoryError, false, name, " out of memory in the PJRT plugin: ", cause,
                   ". ", name, " has a total capacity of ", runtime::format_bytes(s.limit), " (",
                   s.limit_source, "); tensors hold ", runtime::format_bytes(s.allocated), " in ",
                   s.allocations,
                   " storages, and the rest went to the program's own buffers. Free tensors "
                   "(or use smaller batches) and retry.");
}

}  // namespace tpu::aten
