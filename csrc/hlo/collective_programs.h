#pragma once
// The programs the XLA collective engine (csrc/distributed/xla_collective_engine.cpp)
// launches, each as a whole module over `replicas` devices, built from the same functions
// (collectives.h) on the same shapes: one process group's all_reduce, all_gather,
// reduce_scatter, all_to_all, broadcast, or a ring of sends (send/recv's permute). What a
// pod target compiles without the pod (torch_tpu/distributed/topology.py, tests/test_pods.py).
#include <cstdint>
#include <string>
#include <vector>

#include "hlo/types.h"

namespace tpu::hlo {

// The collective names collective_program() accepts, comma-separated.
const char* collective_program_kinds();

// `kind`'s program for a group of `replicas` devices, each holding `count` elements of
// `type` (a multiple of `replicas` for reduce_scatter and all_to_all). Throws
// std::invalid_argument naming the problem for an unknown kind or an uneven count.
//
// With `groups` (each of `replicas` replica ids, together 0..N-1), the program spans all N
// devices instead and each group combines within itself: a mesh axis's collective as one
// program over the mesh, the form JAX compiles (the TPU compiler refuses a program over a
// group's own devices for some groups: v5e columns).
std::string collective_program(const std::string& kind, int64_t replicas, int64_t count,
                               ElementType type,
                               const std::vector<std::vector<int64_t>>& groups = {});

}  // namespace tpu::hlo
