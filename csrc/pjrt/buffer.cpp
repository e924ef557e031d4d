#include "buffer.h"

#include "error.h"

namespace tpu::pjrt {

Buffer::Buffer(std::shared_ptr<const Plugin> plugin, PJRT_Buffer* buffer)
    : plugin_(std::move(plugin)), buffer_(buffer) {}

Buffer::~Buffer() {
  auto args = PJRT_ARGS(PJRT_Buffer_Destroy_Args);
  args.buffer = buffer_;
  PJRT_Error* error = plugin_->api()->PJRT_Buffer_Destroy(&args);
  if (error != nullptr) take_message(plugin_->api(), error);
}

PJRT_Buffer_Type Buffer::element_type() const {
  auto args = PJRT_ARGS(PJRT_Buffer_ElementType_Args);
  args.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_ElementType(&args), "PJRT_Buffer_ElementType");
  return args.type;
}

std::vector<int64_t> Buffer::dims() const {
  auto args = PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
  args.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_Dimensions(&args), "PJRT_Buffer_Dimensions");
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

size_t Buffer::on_device_bytes() const {
  auto args = PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args);
  args.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_OnDeviceSizeInBytes(&args),
        "PJRT_Buffer_OnDeviceSizeInBytes");
  return args.on_device_size_in_bytes;
}

std::unique_ptr<Event> Buffer::to_host_async(void* dst, size_t dst_size) const {
  auto args = PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = dst_size;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_ToHostBuffer(&args),
        "PJRT_Buffer_ToHostBuffer");
  return std::make_unique<Event>(plugin_, args.event);
}

std::unique_ptr<Event> Buffer::ready_event() const {
  auto args = PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args);
  args.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_ReadyEvent(&args), "PJRT_Buffer_ReadyEvent");
  return std::make_unique<Event>(plugin_, args.event);
}

bool Buffer::is_deleted() const {
  auto args = PJRT_ARGS(PJRT_Buffer_IsDeleted_Args);
  args.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_IsDeleted(&args), "PJRT_Buffer_IsDeleted");
  return args.is_deleted;
}

uintptr_t Buffer::unsafe_pointer() const {
  auto args = PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args);
  args.buffer = buffer_;
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_UnsafePointer(&args),
        "PJRT_Buffer_UnsafePointer");
  return args.buffer_pointer;
}

}  // namespace tpu::pjrt
