#include "aten/storage.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <atomic>

#include "aten/device.h"
#include "aten/program.h"
#include "runtime/memory.h"

namespace tpu::aten {

namespace {

// Fake device addresses: far above user space, 256-byte aligned, never reused.
std::atomic<uintptr_t> next_address{uintptr_t{1} << 52};

void delete_storage(void* context) { delete static_cast<runtime::DeviceStorage*>(context); }

class TpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex device = current_device();
    c10::Device where(c10::DeviceType::PrivateUse1, device);
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_storage, where);
    try {
      runtime::memory().reserve(device, static_cast<int64_t>(nbytes));
    } catch (const runtime::OutOfMemory& e) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
    }
    auto storage = std::make_unique<runtime::DeviceStorage>(device, nbytes);
    uintptr_t address = next_address.fetch_add((nbytes + 511) / 256 * 256);
    return c10::DataPtr(reinterpret_cast<void*>(address), storage.release(), &delete_storage,
                        where);
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* /*dest*/, const void* /*src*/, std::size_t /*count*/) const override {
    TORCH_CHECK(false, "tpu memory is not host-addressable; copy tpu tensors with Tensor.copy_()");
  }
};

TpuAllocator the_allocator;

}  // namespace

c10::Allocator* allocator() { return &the_allocator; }

runtime::DeviceStorage* device_storage(const c10::Storage& storage) {
  const c10::DataPtr& data = storage.data_ptr();
  TORCH_INTERNAL_ASSERT(data.device().type() == c10::DeviceType::PrivateUse1);
  if (data.get() == nullptr) return nullptr;
  TORCH_CHECK(data.get_deleter() == &delete_storage,
              "this tpu storage was not allocated by torch_tpu (it has a foreign DataPtr)");
  return static_cast<runtime::DeviceStorage*>(data.get_context());
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  c10::DeviceGuard guard(storage.device());
  c10::DataPtr fresh = allocator()->allocate(nbytes);
  runtime::DeviceStorage* old = device_storage(storage);
  if (old != nullptr && old->has_buffer() && nbytes > 0) {
    copy_storage_prefix(*old, *static_cast<runtime::DeviceStorage*>(fresh.get_context()));
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
  storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
}

}  // namespace tpu::aten
