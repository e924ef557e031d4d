#pragma once
// The device side of one tpu storage. A storage's DataPtr owns a DeviceStorage;
// the DataPtr address never changes, while the immutable PJRT buffer behind it is
// swapped by every write (that is how views and in-place ops share data).
#include <cstdint>
#include <memory>

#include "hlo/types.h"
#include "pjrt/buffer.h"

namespace tpu::runtime {

class DeviceStorage {
 public:
  DeviceStorage(int device, size_t nbytes) : device_(device), nbytes_(nbytes) {}
  ~DeviceStorage();
  DeviceStorage(const DeviceStorage&) = delete;
  DeviceStorage& operator=(const DeviceStorage&) = delete;

  int device() const { return device_; }
  size_t nbytes() const { return nbytes_; }

  // True once something was written; before that the storage reads as zeros.
  bool has_buffer() const { return buffer_ != nullptr; }
  const pjrt::BufferPtr& buffer() const { return buffer_; }
  // The buffer is always 1-D: `elements` values of `element_type`.
  hlo::ElementType element_type() const { return element_type_; }
  int64_t elements() const { return elements_; }

  // Replaces the contents with `buffer` (1-D, `type`, covering all nbytes()).
  void set_buffer(pjrt::BufferPtr buffer, hlo::ElementType type);

 private:
  int device_;
  size_t nbytes_;
  pjrt::BufferPtr buffer_;
  hlo::ElementType element_type_ = hlo::ElementType::U8;
  int64_t elements_ = 0;
};

}  // namespace tpu::runtime
