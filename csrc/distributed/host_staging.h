// Host copies of device tensors for a transport that works on host memory.
#pragma once

#include <ATen/core/Tensor.h>

#include <torch/csrc/distributed/c10d/Types.hpp>

namespace tpu::distributed {

// A contiguous host tensor with t's values: t itself when it already is one. Reading
// a tpu tensor waits for the program that produces it (a sync point of a pending
// defer_and_fuse graph).
at::Tensor to_host(const at::Tensor& t);

// An empty contiguous host tensor shaped and typed like t.
at::Tensor host_like(const at::Tensor& t);

// Writes host's values through t (a view writes through to its base); nothing to do
// when host is t's own memory. Converts dtype where the transport used a wider one.
// This is host's last use: a tpu tensor may take host's memory as its own.
void write_back(const at::Tensor& t, const at::Tensor& host);

// The bytes of a contiguous host tensor, as a 1-D uint8 tensor sharing its memory.
at::Tensor as_bytes(const at::Tensor& host);

// The dtype gloo reduces a dtype in, and the reduction to use there: gloo has no
// int16, and bool reductions follow NCCL's (SUM is OR, PRODUCT is AND).
struct ReduceCarrier {
  at::ScalarType dtype;
  c10d::ReduceOp op;
  bool average;  // AVG: gloo sums, the result is divided by the group size
};
ReduceCarrier reduce_carrier(at::ScalarType dtype, const c10d::ReduceOp& op);

// PREMUL_SUM's factor applied to host (no-op for every other reduction).
void apply_premul(at::Tensor& host, const c10d::ReduceOp& op);

}  // namespace tpu::distributed
