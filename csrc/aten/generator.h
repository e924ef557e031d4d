#pragma once
// The tpu random generator: a (seed, offset) pair per device, as DESIGN.md's random
// ops consume it. Its state is 16 bytes: seed then offset, little-endian uint64.
#include <ATen/core/Generator.h>

namespace tpu::aten {

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

}  // namespace tpu::aten
