#include "runtime/memory.h"

#include <cstdlib>

namespace tpu::runtime {

namespace {
int64_t limit_from_environment() {
  const char* text = std::getenv("TORCH_TPU_HBM_BYTES");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  long long value = std::strtoll(text, &end, 10);
  if (*end != '\0' || value < 0) {
    throw std::invalid_argument(std::string("TORCH_TPU_HBM_BYTES must be a byte count, got '") +
                                text + "'");
  }
  return value;
}
}  // namespace

Memory& memory() {
  static Memory instance;
  return instance;
}

MemoryStats& Memory::at(int device) {
  if (limit_ < 0) limit_ = limit_from_environment();
  if (device >= static_cast<int>(devices_.size())) devices_.resize(device + 1);
  devices_[device].limit = limit_;
  return devices_[device];
}

void Memory::reserve(int device, int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats& s = at(device);
  if (s.limit > 0 && s.allocated + nbytes > s.limit) {
    throw OutOfMemory("tpu:" + std::to_string(device) + " out of memory: tried to allocate " +
                      std::to_string(nbytes) + " bytes with " + std::to_string(s.allocated) +
                      " of " + std::to_string(s.limit) +
                      " bytes in use (limit set by TORCH_TPU_HBM_BYTES)");
  }
  s.allocated += nbytes;
  s.allocations += 1;
  s.total_allocations += 1;
  if (s.allocated > s.peak) s.peak = s.allocated;
}

void Memory::release(int device, int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats& s = at(device);
  s.allocated -= nbytes;
  s.allocations -= 1;
}

MemoryStats Memory::stats(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return at(device);
}

void Memory::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats& s = at(device);
  s.peak = s.allocated;
}

void Memory::set_limit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = bytes;
  for (MemoryStats& s : devices_) s.limit = bytes;
}

}  // namespace tpu::runtime
