#pragma once
// How many memory mappings this process has, against the most Linux allows it.
//
// XLA:CPU loads each compiled program as machine code in mappings of its own: about three per
// kernel, and a fused graph of many ops has many kernels. Linux allows a process
// vm.max_map_count mappings (65530 by default); past it every mmap fails, XLA's loader
// reports compiles and loads as failures, and the next C++ exception crashed inside libgcc's
// unwinder. ProgramCache counts the mappings now and then and loads fewer programs when they
// reach half of the limit.
#include <cstddef>

namespace tpu::runtime {

// The number of lines of /proc/self/maps; 0 where it cannot be read (not Linux). Costs about
// a millisecond per thousand mappings: call it now and then, not per op.
size_t count_process_mappings();

// /proc/sys/vm/max_map_count, read once; 65530 (Linux's default) where it cannot be read.
// TORCH_TPU_MAPPING_LIMIT replaces it (tests; a process that shares the limit with other
// mapping-hungry libraries); a value that is not a positive count throws.
size_t process_mapping_limit();

// How many of `programs` loaded programs to keep so that `mappings` comes down to `target`,
// assuming each program holds an equal share of the mappings above `baseline` (what the
// process had without them). Never below `floor`.
size_t programs_to_keep(size_t programs, size_t mappings, size_t baseline, size_t target,
                        size_t floor);

}  // namespace tpu::runtime
