#pragma once
// Helpers shared by the reduction files (reduce.cpp, reduce_stats.cpp): which dimensions
// a reduction folds and the result shape, NaN-aware max/min folds, and out= checks.
#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

#include "hlo/builder.h"

namespace tpu::aten::reduction {

struct Reduced {
  std::vector<int64_t> dims;   // reduced dimensions, wrapped and sorted
  std::vector<int64_t> shape;  // result shape (with 1s in reduced dims if keepdim)
  int64_t count = 1;           // input elements folded into each result element
};

// An absent `dim` reduces every dimension; so does an empty one, except for any/all.dims
// (`empty_reduces_all` false), where it reduces none.
Reduced reduced_shape(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                      bool empty_reduces_all = true);
hlo::Value splat(hlo::Builder& b, double v, const hlo::Value& like);
// The largest (`upper`) or smallest value of `type`: +-inf for floats, exact limits for integers.
hlo::Value extreme(hlo::Builder& b, hlo::ElementType type, bool upper);
// The maximum (or minimum) over `dims`; NaN wins, as on the CPU.
hlo::Value reduce_extreme(hlo::Builder& b, const hlo::Value& x, bool max,
                          const std::vector<int64_t>& dims);
hlo::Value reduce_sum(hlo::Builder& b, const hlo::Value& x, const std::vector<int64_t>& dims);
// `reduced` (x reduced over r.dims, without keepdim) broadcast back to x's shape.
hlo::Value unreduce(hlo::Builder& b, const hlo::Value& reduced, const hlo::Value& x,
                    const Reduced& r);
// The value and FIRST index of the maximum (or minimum) along `dim`.
std::pair<hlo::Value, hlo::Value> arg_extreme(hlo::Builder& b, const hlo::Value& x, int64_t dim,
                                              bool max);
void check_out_dtype(const at::Tensor& out, c10::ScalarType expected);
void check_can_cast(c10::ScalarType from, const at::Tensor& out);

}  // namespace tpu::aten::reduction
