#pragma once
// Out-of-memory from the device, whichever layer notices it (our capacity check, or the
// PJRT plugin's RESOURCE_EXHAUSTED at compile, execute or transfer), reaches Python as
// torch.OutOfMemoryError, as CUDA's does, so `except torch.OutOfMemoryError` works.
#include <c10/core/Device.h>

#include <new>
#include <string>
#include <utility>

#include "pjrt/error.h"
#include "runtime/memory.h"

namespace tpu::aten {

// Raises c10::OutOfMemoryError for the plugin's message, with what the device holds.
[[noreturn]] void throw_device_out_of_memory(c10::DeviceIndex device, const std::string& message);

// Runs `body`, turning an out-of-memory error into c10::OutOfMemoryError; any other
// error passes through unchanged.
template <typename Body>
decltype(auto) translating_out_of_memory(c10::DeviceIndex device, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const pjrt::Error& error) {
    if (!error.is_out_of_memory()) throw;
    throw_device_out_of_memory(device, error.what());
  } catch (const runtime::OutOfMemory& error) {
    throw_device_out_of_memory(-1, error.what());
  } catch (const std::bad_alloc&) {
    // The CPU plugin's device memory is the host's: its allocation failures are these.
    throw_device_out_of_memory(device, "host allocation failed (std::bad_alloc)");
  }
}

}  // namespace tpu::aten
