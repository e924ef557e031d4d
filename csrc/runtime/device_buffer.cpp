#include "runtime/device_buffer.h"

#include <stdexcept>
#include <string>

#include "runtime/memory.h"

namespace tpu::runtime {

DeviceStorage::~DeviceStorage() { memory().release(device_, nbytes_); }

void DeviceStorage::set_buffer(pjrt::BufferPtr buffer, hlo::ElementType type) {
  size_t element_bytes = hlo::byte_size(type);
  if (nbytes_ % element_bytes != 0) {
    throw std::logic_error("a storage of " + std::to_string(nbytes_) +
                           " bytes cannot hold whole elements of " + hlo::mlir_name(type));
  }
  buffer_ = std::move(buffer);
  element_type_ = type;
  elements_ = static_cast<int64_t>(nbytes_ / element_bytes);
}

}  // namespace tpu::runtime
