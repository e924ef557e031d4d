// PrivateUse1 hooks: availability, device count, generators, pinned host memory
// and storage resizing, as PyTorch asks a backend for them.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/alloc_cpu.h>

#include <map>
#include <mutex>

#include "aten/device.h"
#include "aten/generator.h"
#include "aten/storage.h"

namespace tpu::aten {

namespace {

// Host memory handed out by pin_memory(). On PJRT there is no DMA registration to
// make, but PyTorch users expect pin_memory()/is_pinned() to round-trip. It is also
// the device's host allocator for torch.accelerator (empty_host_cache() and the like
// call through it, and find nothing registered otherwise).
class PinnedAllocator final : public at::HostAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    void* data = nbytes == 0 ? nullptr : c10::alloc_cpu(nbytes);
    if (data != nullptr) {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_[reinterpret_cast<uintptr_t>(data)] = nbytes;
    }
    return c10::DataPtr(data, data, &release, c10::Device(c10::DeviceType::CPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  // A copy from pinned memory is tracked by our own copy engine (copy.cpp waits for the
  // copies touching a host buffer before it is reused), so there is no event to record.
  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override {
    return true;
  }
  // Nothing is cached: every block goes back to the system when it is freed.
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}

  bool contains(const void* pointer) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto address = reinterpret_cast<uintptr_t>(pointer);
    auto block = blocks_.upper_bound(address);
    if (block == blocks_.begin()) return false;
    --block;
    return address < block->first + block->second;
  }

 private:
  static void release(void* data) {
    if (data == nullptr) return;
    {
      std::lock_guard<std::mutex> lock(instance().mutex_);
      instance().blocks_.erase(reinterpret_cast<uintptr_t>(data));
    }
    c10::free_cpu(data);
  }

 public:
  static PinnedAllocator& instance() {
    static PinnedAllocator allocator;
    return allocator;
  }

 private:
  std::mutex mutex_;
  std::map<uintptr_t, size_t> blocks_;
};

class TpuHooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex /*device*/) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    c10::DeviceIndex old = current_device();
    set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device < 0 ? current_device() : device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device < 0 ? current_device() : device);
  }

  at::Device getDeviceFromPtr(void* /*data*/) const override {
    return c10::Device(c10::DeviceType::PrivateUse1, current_device());
  }
  bool isPinnedPtr(const void* data) const override {
    return PinnedAllocator::instance().contains(data);
  }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &PinnedAllocator::instance(); }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    resize_storage_bytes(storage, new_bytes);
  }
};

const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new TpuHooks());  // lives for the process
  c10::SetAllocator(c10::DeviceType::PrivateUse1, allocator());
  at::setHostAllocator(c10::DeviceType::PrivateUse1, &PinnedAllocator::instance());
  return true;
}();

}  // namespace
}  // namespace tpu::aten
