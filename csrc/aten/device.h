#pragma once
// The current tpu device of this thread, and the device count.
#include <c10/core/Device.h>

namespace tpu::aten {

c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);  // checks the index
// The current device of every thread that has not chosen one (a rank's own device).
void set_process_device(c10::DeviceIndex index);  // checks the index
c10::DeviceIndex device_count();                  // 0 before the runtime is initialized

// Throws c10::Error naming the range when `index` is not a tpu device.
void check_device_index(c10::DeviceIndex index);

}  // namespace tpu::aten
