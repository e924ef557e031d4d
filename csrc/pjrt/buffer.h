#pragma once
// Owner of one PJRT_Buffer: an immutable array on one device.
#include <cstdint>
#include <memory>
#include <vector>

#include "event.h"
#include "plugin.h"

namespace tpu::pjrt {

class Buffer {
 public:
  Buffer(std::shared_ptr<const Plugin> plugin, PJRT_Buffer* buffer);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  PJRT_Buffer* get() const { return buffer_; }
  PJRT_Buffer_Type element_type() const;
  std::vector<int64_t> dims() const;
  size_t on_device_bytes() const;

  // Starts copying the whole buffer (dense, row-major) into `dst`, which must hold
  // `dst_size` bytes and stay alive until the returned event fires.
  std::unique_ptr<Event> to_host_async(void* dst, size_t dst_size) const;
  // Copies and waits; throws the plugin's error if the computation producing it failed.
  void to_host(void* dst, size_t dst_size) const { to_host_async(dst, dst_size)->await(); }
  // Fires when the buffer's contents are computed.
  std::unique_ptr<Event> ready_event() const;
  // True once the buffer was donated to (consumed by) an execution.
  bool is_deleted() const;
  // The plugin's address of the contents (PJRT_Buffer_UnsafePointer): host memory on
  // the CPU plugin, device memory elsewhere. Valid while this Buffer lives.
  uintptr_t unsafe_pointer() const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_Buffer* buffer_;
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace tpu::pjrt
