#pragma once
// XLA:CPU keeps device buffers in the process's malloc heap. glibc's defaults suit small
// objects: buffers above a moving threshold get fresh mmaps, and free memory at the top of
// the heap goes back to the system. A training step that frees and reallocates the same
// few megabytes each step then page-faults them in again every step (30 to 400 faults per
// GPT step here, against 5 tuned).

namespace tpu::runtime {

// Whether TORCH_TPU_HOST_HEAP_TUNING asks for the tuning (unset or 1: yes, 0: no); throws
// std::invalid_argument naming the variable for any other value.
bool host_heap_tuning_requested();

// Keeps device-sized buffers (up to 32 MiB) in the heap and freed memory (up to 256 MiB per
// malloc arena) in the process, growing the heap 64 MiB at a time. Applies once; glibc
// only. Returns whether it is applied (false if glibc refused a setting: those it took stay).
bool tune_host_heap_for_device_buffers();

// Whether tune_host_heap_for_device_buffers applied its settings in this process.
bool host_heap_tuned();

}  // namespace tpu::runtime
