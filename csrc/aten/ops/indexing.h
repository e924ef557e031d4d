#pragma once
// StableHLO gather/scatter with explicit dimension numbers, and index bounds checks,
// shared by index.cpp, index_advanced.cpp and shape.cpp.
#include <ATen/core/Tensor.h>

#include <functional>
#include <utility>
#include <vector>

#include "hlo/builder.h"

namespace tpu::aten::indexing {

enum class Combine { Replace, Add, Mul, Max, Min };

struct GatherDims {
  std::vector<int64_t> offset_dims, collapsed_slice_dims, start_index_map, slice_sizes;
  int64_t index_vector_dim = 0;
};
struct ScatterDims {
  std::vector<int64_t> update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  int64_t index_vector_dim = 0;
};

hlo::Value gather(hlo::Builder& b, const hlo::Value& x, const hlo::Value& indices,
                  const GatherDims& d, const std::vector<int64_t>& result_dims);
hlo::Value scatter(hlo::Builder& b, const hlo::Value& x, const hlo::Value& indices,
                   const hlo::Value& updates, const ScatterDims& d, Combine combine);

// Gathers slices of `x` along `dim` at the s64 positions of 1-D `index` (index_select).
hlo::Value take_along(hlo::Builder& b, const hlo::Value& x, int64_t dim, const hlo::Value& index);
// Combines `updates` (x's shape with index.size(0) at `dim`) into x at `index` along `dim`.
hlo::Value put_along(hlo::Builder& b, const hlo::Value& x, int64_t dim, const hlo::Value& index,
                     const hlo::Value& updates, Combine combine);

// Calls `check(lo, hi)` with the smallest and largest value of a non-empty integer
// tpu tensor (one tiny program and a two-element download), at once or, in
// defer_and_fuse mode, when the pending graph runs (see check_later).
void check_min_max(const at::Tensor& index, std::function<void(int64_t lo, int64_t hi)> check);

}  // namespace tpu::aten::indexing
