#include "aten/host_access.h"

#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>
#include <c10/util/strides.h>

#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "aten/device_errors.h"
#include "aten/dtype.h"
#include "aten/program.h"
#include "aten/storage.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu::aten {

namespace {

// The storage of t when t is all of it, in the storage's own dtype; else null.
runtime::DeviceStorage* whole_storage(const at::Tensor& t) {
  if (t.numel() == 0) return nullptr;
  runtime::DeviceStorage* storage = device_storage(t.storage());
  if (storage == nullptr) return nullptr;  // never written: no buffer yet
  bool whole = t.is_contiguous() && t.storage_offset() == 0 &&
               static_cast<size_t>(t.numel()) * t.element_size() == storage->nbytes();
  return whole ? storage : nullptr;
}

bool same_layout(const at::Tensor& device, const at::Tensor& host) {
  return host.is_cpu() && host.is_contiguous() && host.scalar_type() == device.scalar_type() &&
         host.numel() == device.numel();
}

// Host storages the device has released, by size. Bounded: at most kPerSize of one
// size and kTotalBytes in all; beyond that memory goes back to the allocator.
class StagingPool {
 public:
  static StagingPool& get() {
    static StagingPool* pool = new StagingPool();  // never destroyed: PJRT threads use it
    return *pool;
  }

  c10::Storage take(size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& list = free_[nbytes];
    for (auto it = list.begin(); it != list.end(); ++it) {
      if (it->use_count() != 1) continue;  // someone still reads it
      c10::Storage storage = std::move(*it);
      list.erase(it);
      total_ -= nbytes;
      return storage;
    }
    return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, c10::GetCPUAllocator());
  }

  void give_back(c10::Storage storage) {
    size_t nbytes = storage.nbytes();
    std::lock_guard<std::mutex> lock(mutex_);
    auto& list = free_[nbytes];
    if (list.size() >= kPerSize || total_ + nbytes > kTotalBytes) return;
    total_ += nbytes;
    list.push_back(std::move(storage));
  }

 private:
  static constexpr size_t kPerSize = 2;
  static constexpr size_t kTotalBytes = size_t{1} << 30;
  std::mutex mutex_;
  std::unordered_map<size_t, std::list<c10::Storage>> free_;
  size_t total_ = 0;
};

}  // namespace

at::Tensor staging_tensor(at::IntArrayRef sizes, at::ScalarType dtype) {
  int64_t numel = c10::multiply_integers(sizes);
  size_t nbytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  if (nbytes < (size_t{1} << 16)) return at::empty(sizes, at::TensorOptions().dtype(dtype));
  at::Tensor t = at::empty({0}, at::TensorOptions().dtype(dtype));
  t.set_(StagingPool::get().take(nbytes), 0, sizes, c10::contiguous_strides(sizes));
  return t;
}

void read_to_host(const at::Tensor& src, const at::Tensor& dst) {
  TORCH_INTERNAL_ASSERT(same_layout(src, dst));
  runtime::DeviceStorage* storage = taking_xla_cpu_shortcuts() ? whole_storage(src) : nullptr;
  if (src.numel() == 0) return;
  if (storage == nullptr || !storage->has_buffer() ||
      storage->element_type() != storage_element_type(src.scalar_type())) {
    at::Tensor out = dst;
    out.copy_(src);
    return;
  }
  translating_out_of_memory(src.device().index(), [&] {
    const pjrt::BufferPtr& buffer = storage->buffer();  // runs a pending graph
    buffer->ready_event()->await();                     // raises the producer's error
  });
  const pjrt::BufferPtr& buffer = storage->buffer();
  std::memcpy(dst.data_ptr(), reinterpret_cast<const void*>(buffer->unsafe_pointer()),
              dst.nbytes());
  runtime::metrics().count_device_to_host();
  runtime::Runtime::get().after_host_wait();
}

void adopt_host(const at::Tensor& dst, const at::Tensor& host) {
  TORCH_INTERNAL_ASSERT(same_layout(dst, host));
  runtime::DeviceStorage* storage = taking_xla_cpu_shortcuts() ? whole_storage(dst) : nullptr;
  if (dst.numel() == 0) return;
  if (storage == nullptr) {
    at::Tensor out = dst;
    out.copy_(host);
    return;
  }
  c10::DeviceGuard guard(dst.device());
  hlo::ElementType type = storage_element_type(dst.scalar_type());
  const int64_t elements = host.numel() * storage_elements_per_value(dst.scalar_type());
  auto keep_alive = std::make_shared<c10::Storage>(host.storage());
  const void* data = host.data_ptr();
  storage->set_buffer(runtime::Runtime::get().client().buffer_aliasing_host(
                          data, buffer_type(type), {elements}, storage->device(),
                          [keep_alive]() mutable {
                            StagingPool::get().give_back(std::move(*keep_alive));
                            keep_alive.reset();
                          }),
                      type);
  runtime::metrics().count_host_to_device();
}

}  // namespace tpu::aten
