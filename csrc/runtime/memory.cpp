#include "runtime/memory.h"

#include <unistd.h>

#include <cstdio>
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

std::string format_bytes(int64_t bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[48];
  if (unit == 0) {
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(bytes));
  } else {
    std::snprintf(text, sizeof(text), "%.2f %s", value, units[unit]);
  }
  return text;
}

int64_t host_physical_memory() {
  return static_cast<int64_t>(sysconf(_SC_PAGE_SIZE)) * sysconf(_SC_PHYS_PAGES);
}

Memory& memory() {
  static Memory instance;
  return instance;
}

MemoryStats& Memory::counters(int device) {
  if (device >= static_cast<int>(devices_.size())) devices_.resize(device + 1);
  return devices_[device];
}

int64_t Memory::limit_of(int device) {
  if (limit_ < 0) limit_ = limit_from_environment();
  if (limit_ > 0) return limit_;
  return device < static_cast<int>(capacities_.size()) ? capacities_[device].bytes : 0;
}

MemoryStats& Memory::at(int device) {
  MemoryStats& s = counters(device);
  s.limit = limit_of(device);
  if (limit_ > 0) {
    s.limit_source = "set by TORCH_TPU_HBM_BYTES";
  } else if (device < static_cast<int>(capacities_.size())) {
    s.limit_source = capacities_[device].source;
  } else {
    s.limit_source.clear();
  }
  return s;
}

void Memory::reserve(int device, int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Every allocation passes here: the limit's description is only looked up to report it.
  MemoryStats& s = counters(device);
  const int64_t limit = limit_of(device);
  if (limit > 0 && s.allocated + nbytes > limit) {
    at(device);  // fills in s.limit and s.limit_source for the message
    std::string name = "tpu:" + std::to_string(device);
    throw OutOfMemory(name + " out of memory. Tried to allocate " + format_bytes(nbytes) + " (" +
                      std::to_string(nbytes) + " bytes). " + name + " has a total capacity of " +
                      format_bytes(s.limit) + " (" + s.limit_source + ") of which " +
                      format_bytes(s.limit - s.allocated) + " is free; " +
                      format_bytes(s.allocated) + " is allocated by " +
                      std::to_string(s.allocations) + " tensor storages.");
  }
  s.allocated += nbytes;
  s.allocations += 1;
  s.total_allocations += 1;
  if (s.allocated > s.peak) s.peak = s.allocated;
}

void Memory::release(int device, int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats& s = counters(device);
  s.allocated -= nbytes;
  s.allocations -= 1;
}

MemoryStats Memory::stats(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return at(device);
}

void Memory::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  MemoryStats& s = counters(device);
  s.peak = s.allocated;
}

void Memory::set_capacity(int device, int64_t bytes, const std::string& source) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device >= static_cast<int>(capacities_.size())) capacities_.resize(device + 1);
  capacities_[device] = Capacity{bytes, source};
}

void Memory::set_limit(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = bytes;
}

}  // namespace tpu::runtime
