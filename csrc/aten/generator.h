#pragma once
// The tpu random generator: a (seed, offset) pair per device, as DESIGN.md's random
// ops consume it. Its state is 16 bytes: seed then offset, little-endian uint64.
#include <ATen/core/Generator.h>

#include <array>
#include <optional>
#include <vector>

#include "hlo/builder.h"

namespace tpu::aten {

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);

// The key (seed, offset) for the next random op on `device`, taken from `generator`
// (or the device's default one), whose offset it then advances. Random ops pass the
// key to their program at run time, so a new key never recompiles.
class Program;

// Uniform floats in [0, 1) of `type` (F32 or F64) and shape `dims`, drawn in `p` with the next
// key of `generator` (or the device's default one). Defined in random.cpp.
hlo::Value uniform01(Program& p, const std::vector<int64_t>& dims, hlo::ElementType type,
                     const std::optional<at::Generator>& generator, c10::DeviceIndex device);

std::array<uint64_t, 2> next_random_key(const std::optional<at::Generator>& generator,
                                        c10::DeviceIndex device);

// While set (on this thread), next_random_key appends the generator each key came
// from to `log`: a replayed graph draws its keys from the same generators. Null stops.
void log_random_keys(std::vector<at::Generator>* log);

}  // namespace tpu::aten
