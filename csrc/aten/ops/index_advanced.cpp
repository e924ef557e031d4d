// Advanced indexing: index.Tensor (any mix of None and integer/bool tensor indices),
// _index_put_impl_ (x[idx] = v, with or without accumulation), masked_select and
// nonzero. Bool masks make sizes data-dependent: nonzero downloads the mask and
// uploads the coordinates (an honest host round trip).
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/nonzero.h>

#include <optional>

#include "aten/ops/indexing.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

// The mask of `self[mask] = value` when `indices` is one boolean (or byte) mask, possibly
// after leading full slices, as PyTorch's canDispatchToMaskedFill finds it, moved to
// self's device and shaped to broadcast over self's trailing dims.
std::optional<at::Tensor> single_mask(const at::Tensor& self,
                                      const c10::List<std::optional<at::Tensor>>& indices) {
  int64_t leading = 0;
  std::optional<at::Tensor> mask;
  for (const std::optional<at::Tensor>& index : indices) {
    if (!index.has_value() || !index->defined()) {
      if (mask.has_value()) return std::nullopt;  // a slice after the mask
      ++leading;
      continue;
    }
    if (mask.has_value() ||
        (index->scalar_type() != at::kBool && index->scalar_type() != at::kByte)) {
      return std::nullopt;
    }
    mask = *index;
  }
  if (!mask.has_value()) return std::nullopt;
  for (int64_t j = 0; j < mask->dim(); ++j) {
    int64_t k = leading + j;
    TORCH_CHECK_INDEX(k < self.dim() && mask->size(j) == self.size(k), "The shape of the mask ",
                      mask->sizes(), " at index ", j,
                      " does not match the shape of the indexed tensor ", self.sizes(),
                      " at index ", k);
  }
  std::vector<int64_t> shape(leading, 1);
  for (int64_t size : mask->sizes()) shape.push_back(size);
  shape.resize(self.dim(), 1);
  return mask->to(self.device(), at::kBool).reshape(shape);
}

// The shape the index tensors broadcast to; like PyTorch, an IndexError naming every
// index's shape when they do not broadcast.
std::vector<int64_t> broadcast_index_shapes(const std::vector<at::Tensor>& indices) {
  std::vector<int64_t> shape = indices.front().sizes().vec();
  for (size_t i = 1; i < indices.size(); ++i) {
    c10::IntArrayRef next = indices[i].sizes();
    bool fits = true;
    for (size_t k = 0; k < std::min(shape.size(), next.size()); ++k) {
      int64_t a = shape[shape.size() - 1 - k], b = next[next.size() - 1 - k];
      fits = fits && (a == b || a == 1 || b == 1);
    }
    if (!fits) {
      std::string shapes;
      for (const at::Tensor& index : indices) {
        shapes += (shapes.empty() ? "" : ", ") + c10::str(index.sizes());
      }
      TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together ",
                        "with shapes ", shapes);
    }
    shape = at::infer_size(shape, next);
  }
  return shape;
}

using hlo::Builder;
using hlo::TensorType;
using hlo::Value;

// The indices after masks became coordinates, broadcast together, and where the
// result's indexed block goes.
struct Plan {
  std::vector<int64_t> dims;        // indexed dimensions of self, ascending
  std::vector<at::Tensor> tensors;  // their (integer) index tensors, in the same order
  std::vector<int64_t> batch;       // broadcast shape of the index tensors
  std::vector<int64_t> result;      // result shape
  std::vector<int64_t> offset;      // positions of self's non-indexed dims in the result
  std::vector<int64_t> slice;       // slice sizes (1 in indexed dims)
};

Plan make_plan(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  at::native::checkIndexTensorTypes(indices, /*allow_int=*/true);
  int64_t consumed = 0;
  for (const std::optional<at::Tensor>& index : indices) {
    bool mask = index.has_value() && index->defined() &&
                (index->scalar_type() == at::kBool || index->scalar_type() == at::kByte);
    consumed += mask ? index->dim() : 1;
  }
  TORCH_CHECK_INDEX(consumed <= self.dim(), "too many indices for tensor of dimension ", self.dim(),
                    " (got ", consumed, ")");
  std::vector<at::Tensor> expanded =
      at::native::expandTensors(self, indices, /*ensure_same_device=*/true);
  Plan plan;
  for (size_t d = 0; d < expanded.size(); ++d) {
    if (!expanded[d].defined()) continue;
    plan.dims.push_back(static_cast<int64_t>(d));
    plan.tensors.push_back(expanded[d]);
  }
  TORCH_CHECK_INDEX(!plan.tensors.empty(), "index(): at least one index must be a tensor");
  plan.batch = broadcast_index_shapes(plan.tensors);
  bool adjacent =
      plan.dims.back() - plan.dims.front() + 1 == static_cast<int64_t>(plan.dims.size());
  const int64_t first = adjacent ? plan.dims.front() : 0;
  const int64_t nb = static_cast<int64_t>(plan.batch.size());
  size_t k = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    bool indexed = k < plan.dims.size() && plan.dims[k] == d;
    plan.slice.push_back(indexed ? 1 : self.size(d));
    if (indexed) {
      ++k;
      continue;
    }
    // Non-indexed dims before the block keep their place; the rest follow it.
    int64_t position = static_cast<int64_t>(plan.offset.size());
    if (!adjacent || d >= first) position += nb;
    plan.offset.push_back(position);
  }
  plan.result.assign(plan.offset.size() + nb, 0);
  std::vector<bool> taken(plan.result.size(), false);
  size_t o = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (std::find(plan.dims.begin(), plan.dims.end(), d) != plan.dims.end()) continue;
    plan.result[plan.offset[o]] = self.size(d);
    taken[plan.offset[o++]] = true;
  }
  size_t j = 0;
  for (size_t pos = 0; pos < plan.result.size(); ++pos) {
    if (!taken[pos]) plan.result[pos] = plan.batch[j++];
  }
  return plan;
}

int64_t numel_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// IndexError like the CPU's when an index is outside [-size, size).
void check_bounds(const at::Tensor& self, const Plan& plan) {
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    if (plan.tensors[i].numel() == 0) continue;
    const int64_t size = self.size(plan.dims[i]);
    const int64_t dim = plan.dims[i];
    // The CPU's words when the dimension is empty: every index is out of bounds.
    TORCH_CHECK_INDEX(size != 0, "index is out of bounds for dimension with size 0");
    indexing::check_min_max(plan.tensors[i], [size, dim](int64_t lo, int64_t hi) {
      TORCH_CHECK_INDEX(lo >= -size && hi < size, "index ", lo < -size ? lo : hi,
                        " is out of bounds for dimension ", dim, " with size ", size);
    });
  }
}

// [batch..., k] s64 coordinates with negative indices wrapped.
Value coordinates(Program& p, const at::Tensor& self, const Plan& plan) {
  auto& b = p.b();
  std::vector<int64_t> dims = plan.batch;
  dims.push_back(1);
  std::vector<Value> parts;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    Value v = b.broadcast_to(p.read(plan.tensors[i], at::kLong), plan.batch);
    Value zero = b.broadcast_to(b.constant(0, hlo::ElementType::S64), plan.batch);
    Value size = b.broadcast_to(
        b.constant(static_cast<double>(self.size(plan.dims[i])), hlo::ElementType::S64),
        plan.batch);
    v = b.select(b.compare(hlo::Compare::LT, v, zero), b.binary("add", v, size), v);
    parts.push_back(b.reshape(v, dims));
  }
  return b.concatenate(parts, static_cast<int64_t>(plan.batch.size()));
}

void lower_index(const at::Tensor& self, const Plan& plan, const at::Tensor& out) {
  if (numel_of(plan.result) == 0) return;
  Program p("aten::index.Tensor_out");
  auto& b = p.b();
  indexing::GatherDims d;
  d.offset_dims = plan.offset;
  d.collapsed_slice_dims = plan.dims;
  d.start_index_map = plan.dims;
  d.slice_sizes = plan.slice;
  d.index_vector_dim = static_cast<int64_t>(plan.batch.size());
  Value r = indexing::gather(b, p.read(self), coordinates(p, self, plan), d, plan.result);
  p.write(out, r);
  p.run();
}

}  // namespace

at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                      at::Tensor& out) {
  Plan plan = make_plan(self, indices);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: self (", self.scalar_type(),
              ") and result (", out.scalar_type(), ") must have the same scalar type");
  at::native::resize_output(out, plan.result);
  check_bounds(self, plan);
  lower_index(self, plan, out);
  return out;
}

at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  Plan plan = make_plan(self, indices);
  at::Tensor out = at::empty(plan.result, self.options());
  check_bounds(self, plan);
  lower_index(self, plan, out);
  return out;
}

at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool /*unsafe*/) {
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(),
                    "too many indices for tensor of dimension ", self.dim(), " (got ",
                    indices.size(), ")");
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, values);
  bool any_index = false;
  for (const std::optional<at::Tensor>& index : indices) {
    any_index = any_index || (index.has_value() && index->defined());
  }
  if (!any_index) {  // x.index_put_([], v): the whole tensor, as on the CPU
    TORCH_CHECK(at::is_expandable_to(values.sizes(), self.sizes()),
                "shape mismatch: value tensor of shape ", values.sizes(),
                " cannot be broadcast to indexing result of shape ", self.sizes());
    TORCH_CHECK(values.scalar_type() == self.scalar_type(),
                "Index put requires the source and destination dtypes match, got ",
                self.scalar_type(), " for the destination and ", values.scalar_type(),
                " for the source.");
    return accumulate ? self.add_(values) : self.copy_(values);
  }
  // x[mask] = v with one mask and one value is a masked fill: no nonzero(), so no shape that
  // depends on the data and no new program for each count of true elements. Like the CPU's
  // masked-fill dispatch, it converts a CPU value to self's dtype.
  if (!accumulate && values.numel() == 1 &&
      (values.is_cpu() || values.scalar_type() == self.scalar_type())) {
    if (std::optional<at::Tensor> mask = single_mask(self, indices)) {
      return self.masked_fill_(*mask, values.reshape({}));
    }
  }
  Plan plan = make_plan(self, indices);
  TORCH_CHECK(at::is_expandable_to(values.sizes(), plan.result),
              "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(plan.result));
  TORCH_CHECK(values.scalar_type() == self.scalar_type(),
              "Index put requires the source and destination dtypes match, got ",
              self.scalar_type(), " for the destination and ", values.scalar_type(),
              " for the source.");
  check_bounds(self, plan);
  if (numel_of(plan.result) == 0 || self.numel() == 0) return self;
  Program p(accumulate ? "aten::_index_put_impl_.accumulate" : "aten::_index_put_impl_");
  auto& b = p.b();
  indexing::ScatterDims d;
  d.update_window_dims = plan.offset;
  d.inserted_window_dims = plan.dims;
  d.scatter_dims_to_operand_dims = plan.dims;
  d.index_vector_dim = static_cast<int64_t>(plan.batch.size());
  Value x = p.read(self);
  Value v = b.broadcast_to(p.read(values), plan.result);
  Value r = indexing::scatter(b, x, coordinates(p, self, plan), v, d,
                              accumulate ? indexing::Combine::Add : indexing::Combine::Replace);
  p.write(self, r);
  p.run();
  return self;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto [s, m] = at::expand_outplace(self, mask);
  c10::List<std::optional<at::Tensor>> indices;
  indices.push_back(m->dim() == 0 ? m->reshape({1}) : *m);
  at::Tensor source = s->dim() == 0 ? s->reshape({1}) : *s;
  return tpu::aten::index(source, indices);
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  at::Tensor r = tpu::aten::masked_select(self, mask);
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  TORCH_CHECK(self.numel() < std::numeric_limits<int32_t>::max(),
              "nonzero is not supported for tensors with more than INT_MAX elements");
  return at::nonzero(self.cpu()).to(self.device());
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type ",
              at::kLong, " but got scalar type", out.scalar_type());
  TORCH_CHECK(out.device() == self.device(),
              "nonzero: Expected out tensor to be on the same device as self (", self.device(),
              ") but got out on ", out.device());
  at::Tensor r = tpu::aten::nonzero(self);
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

}  // namespace tpu::aten
