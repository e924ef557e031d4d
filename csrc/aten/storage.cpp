#include "aten/storage.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "aten/device.h"
#include "aten/program.h"
#include "runtime/memory.h"

namespace tpu::aten {

namespace {

// Fake device addresses: far above user space, 256-byte aligned, never reused.
std::atomic<uintptr_t> next_address{uintptr_t{1} << 52};

// Live storages by address, so a tensor PyTorch builds with at::from_blob over a tpu
// storage's address (as storage serialization does) still finds its device buffer.
std::mutex live_mutex;
std::unordered_map<uintptr_t, runtime::DeviceStorage*> live;

// What a tpu DataPtr's context owns: the storage and the address it was given.
struct Allocation {
  Allocation(int device, size_t nbytes, uintptr_t address)
      : storage(device, nbytes), address(address) {}
  runtime::DeviceStorage storage;
  uintptr_t address;
};

void delete_storage(void* context) {
  auto* allocation = static_cast<Allocation*>(context);
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    live.erase(allocation->address);
  }
  delete allocation;
}

// A c10::DeviceAllocator so that torch.accelerator's memory functions work; there is no
// cache of freed memory, so "reserved" equals "allocated".
class TpuAllocator final : public c10::DeviceAllocator {
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
    uintptr_t address = next_address.fetch_add((nbytes + 511) / 256 * 256);
    auto allocation = std::make_unique<Allocation>(device, nbytes, address);
    {
      std::lock_guard<std::mutex> lock(live_mutex);
      live[address] = &allocation->storage;
    }
    return c10::DataPtr(reinterpret_cast<void*>(address), allocation.release(), &delete_storage,
                        where);
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* /*dest*/, const void* /*src*/, std::size_t /*count*/) const override {
    TORCH_CHECK(false, "tpu memory is not host-addressable; copy tpu tensors with Tensor.copy_()");
  }

  bool initialized() override { return device_count() > 0; }
  void emptyCache(c10::MempoolId_t /*pool*/) override {}
  // One stream per device and buffers freed only when unused: nothing to record.
  void recordStream(const c10::DataPtr& /*data*/, c10::Stream /*stream*/) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_device_index(device);
    runtime::MemoryStats s = runtime::memory().stats(device);
    c10::CachingDeviceAllocator::DeviceStats stats;
    auto all = [](auto& array) -> c10::CachingAllocator::Stat& {
      return array[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
    };
    for (auto* bytes : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                        &stats.requested_bytes}) {
      all(*bytes).current = s.allocated;
      all(*bytes).peak = s.peak;
    }
    for (auto* count : {&stats.allocation, &stats.active, &stats.segment}) {
      all(*count).current = s.allocations;
      all(*count).allocated = s.total_allocations;
    }
    return stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex /*device*/) override {}
  void resetPeakStats(c10::DeviceIndex device) override {
    check_device_index(device);
    runtime::memory().reset_peak(device);
  }

  // Under TORCH_TPU_HBM_BYTES the cap is the total; without one, the host's memory
  // (what the CPU plugin allocates from).
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    runtime::MemoryStats s = runtime::memory().stats(device);
    int64_t total = s.limit > 0 ? s.limit : sysconf(_SC_PAGE_SIZE) * sysconf(_SC_PHYS_PAGES);
    return {static_cast<size_t>(std::max<int64_t>(total - s.allocated, 0)),
            static_cast<size_t>(total)};
  }
};

TpuAllocator the_allocator;

}  // namespace

c10::Allocator* allocator() { return &the_allocator; }

runtime::DeviceStorage* device_storage(const c10::Storage& storage) {
  const c10::DataPtr& data = storage.data_ptr();
  TORCH_INTERNAL_ASSERT(data.device().type() == c10::DeviceType::PrivateUse1);
  if (data.get() == nullptr) return nullptr;
  if (data.get_deleter() == &delete_storage) {
    return &static_cast<Allocation*>(data.get_context())->storage;
  }
  std::lock_guard<std::mutex> lock(live_mutex);
  auto found = live.find(reinterpret_cast<uintptr_t>(data.get()));
  TORCH_CHECK(found != live.end(),
              "this tpu storage does not start at a tpu allocation (a foreign or offset DataPtr); "
              "copy the tensor with Tensor.to() instead");
  return found->second;
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  c10::DeviceGuard guard(storage.device());
  c10::DataPtr fresh = allocator()->allocate(nbytes);
  runtime::DeviceStorage* old = device_storage(storage);
  if (old != nullptr && old->has_buffer() && nbytes > 0) {
    copy_storage_prefix(*old, static_cast<Allocation*>(fresh.get_context())->storage);
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
  storage.unsafeGetStorageImpl()->set_nbytes(nbytes);
}

}  // namespace tpu::aten
