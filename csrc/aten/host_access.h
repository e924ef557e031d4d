// Host access to whole tpu storages without PJRT's transfer copies, where the
// device's memory is host memory (the CPU plugin). Collectives that stage through
// host memory use it: PJRT_Buffer_ToHostBuffer and a copying upload cost several
// times a memcpy there. Elsewhere these fall back to ordinary copies.
#pragma once

#include <ATen/core/Tensor.h>

namespace tpu::aten {

// An uninitialized contiguous CPU tensor for staging device data, from a pool of
// host memory that adopt_host() hands back once the device is done with it: large
// staging buffers stay warm instead of being page-faulted in for every collective.
at::Tensor staging_tensor(at::IntArrayRef sizes, at::ScalarType dtype);

// Writes tpu tensor src's values into dst, a contiguous CPU tensor of the same dtype
// and number of elements. Waits for the program that produces src.
void read_to_host(const at::Tensor& src, const at::Tensor& dst);

// Makes tpu tensor dst hold host's values (a contiguous CPU tensor of dst's dtype
// and number of elements). The device may keep host's memory as its own: the
// caller must not write to host afterwards. Memory from staging_tensor() returns to
// the pool when the device releases it.
void adopt_host(const at::Tensor& dst, const at::Tensor& host);

}  // namespace tpu::aten
