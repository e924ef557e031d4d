// Indexing along one dimension: index_select, gather, scatter (src/value/reduce),
// scatter_add, scatter_reduce, index_add, embedding_dense_backward, plus the shared
// gather/scatter builders (index.h). Out-of-range indices are found with a tiny
// min/max program whose two results are downloaded, so errors match the CPU's.
#include "aten/ops/indexing.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <ATen/ops/empty.h>

#include <sstream>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"

namespace tpu::aten {

namespace indexing {

using hlo::Builder;
using hlo::TensorType;
using hlo::Value;

namespace {

std::string list(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string field(const char* name, const std::vector<int64_t>& v) {
  return v.empty() ? "" : std::string(name) + " = " + list(v) + ", ";
}

const char* combine_op(Combine c, hlo::ElementType type) {
  bool pred = type == hlo::ElementType::Pred;
  switch (c) {
    case Combine::Add: return pred ? "or" : "add";
    case Combine::Mul: return pred ? "and" : "multiply";
    case Combine::Max: return pred ? "or" : "maximum";
    case Combine::Min: return pred ? "and" : "minimum";
    case Combine::Replace: break;
  }
  return nullptr;
}

std::vector<int64_t> all_but(int64_t rank, int64_t dim) {
  std::vector<int64_t> v;
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim) v.push_back(d);
  return v;
}

}  // namespace

Value gather(Builder& b, const Value& x, const Value& indices, const GatherDims& d,
             const std::vector<int64_t>& result_dims) {
  std::string attributes =
      "dimension_numbers = #stablehlo.gather<" + field("offset_dims", d.offset_dims) +
      field("collapsed_slice_dims", d.collapsed_slice_dims) +
      field("start_index_map", d.start_index_map) +
      "index_vector_dim = " + std::to_string(d.index_vector_dim) +
      ">, slice_sizes = " + hlo::i64_array(d.slice_sizes) + ", indices_are_sorted = false";
  return b.op("gather", {x, indices}, TensorType{x.element(), result_dims}, attributes);
}

Value scatter(Builder& b, const Value& x, const Value& indices, const Value& updates,
              const ScatterDims& d, Combine combine) {
  std::string attributes = "scatter_dimension_numbers = #stablehlo.scatter<" +
                           field("update_window_dims", d.update_window_dims) +
                           field("inserted_window_dims", d.inserted_window_dims) +
                           field("scatter_dims_to_operand_dims", d.scatter_dims_to_operand_dims) +
                           "index_vector_dim = " + std::to_string(d.index_vector_dim) +
                           ">, indices_are_sorted = false, unique_indices = false";
  TensorType scalar{x.element(), {}};
  const char* op = combine_op(combine, x.element());
  std::string body = b.region({scalar, scalar}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{op == nullptr ? a[1] : r.op(op, {a[0], a[1]}, scalar)};
  });
  return b.op("scatter", {x, indices, updates}, x.type, attributes, body);
}

Value take_along(Builder& b, const Value& x, int64_t dim, const Value& index) {
  const int64_t n = index.type.num_elements();
  GatherDims d;
  d.offset_dims = all_but(x.rank(), dim);
  d.collapsed_slice_dims = {dim};
  d.start_index_map = {dim};
  d.slice_sizes = x.dims();
  d.slice_sizes[dim] = 1;
  d.index_vector_dim = 1;
  std::vector<int64_t> result = x.dims();
  result[dim] = n;
  return gather(b, x, b.reshape(index, {n, 1}), d, result);
}

Value put_along(Builder& b, const Value& x, int64_t dim, const Value& index, const Value& updates,
                Combine combine) {
  const int64_t n = index.type.num_elements();
  ScatterDims d;
  d.update_window_dims = all_but(x.rank(), dim);
  d.inserted_window_dims = {dim};
  d.scatter_dims_to_operand_dims = {dim};
  d.index_vector_dim = 1;
  return scatter(b, x, b.reshape(index, {n, 1}), updates, d, combine);
}

void check_min_max(const at::Tensor& index, std::function<void(int64_t lo, int64_t hi)> check) {
  at::Tensor out = at::empty({2}, index.options().dtype(at::kLong));
  static const char* const kName = "tpu::index_min_max";
  PreparedCall call(kName, {&index, &out}, {});
  if (!call.run()) {
    Program p(kName, &call);
    auto& b = p.b();
    Value v = b.reshape(p.read(index, at::kLong), {index.numel()});
    const double big = 4611686018427387904.0;  // 2^62, exact in a double
    Value lo = b.reduce(v, b.constant(big, hlo::ElementType::S64), hlo::Reduction::Min, {0});
    Value hi = b.reduce(v, b.constant(-big, hlo::ElementType::S64), hlo::Reduction::Max, {0});
    p.write(out, b.concatenate({b.reshape(lo, {1}), b.reshape(hi, {1})}, 0));
    p.run();
  }
  check_later(out, [check = std::move(check)](const at::Tensor& host) {
    const int64_t* values = host.const_data_ptr<int64_t>();
    check(values[0], values[1]);
  });
}

}  // namespace indexing

namespace {

using hlo::Builder;
using hlo::TensorType;
using hlo::Value;
using indexing::Combine;

// Throws the CPU's "index i is out of bounds for dimension d with size n" when any
// index is outside [0, size).
void check_in_range(const at::Tensor& index, int64_t dim, int64_t size) {
  if (index.numel() == 0) return;
  indexing::check_min_max(index, [dim, size](int64_t lo, int64_t hi) {
    int64_t bad = lo < 0 ? lo : hi;
    TORCH_CHECK(lo >= 0 && hi < size, "index ", bad, " is out of bounds for dimension ", dim,
                " with size ", size);
  });
}

// Full coordinates [I..., r] for torch.gather/scatter: iotas in every dimension but
// `dim`, which takes `index`.
Value point_coordinates(Builder& b, const Value& index, int64_t dim) {
  std::vector<int64_t> dims = index.dims();
  dims.push_back(1);
  std::vector<Value> parts;
  for (int64_t k = 0; k < index.rank(); ++k) {
    Value part = k == dim ? index : b.iota(TensorType{hlo::ElementType::S64, index.dims()}, k);
    parts.push_back(b.reshape(part, dims));
  }
  return b.concatenate(parts, index.rank());
}

std::vector<int64_t> iota_list(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// x with `combine` applied at the points named by `index` along `dim` (same rank).
Value scatter_points(Builder& b, const Value& x, const Value& index, int64_t dim,
                     const Value& updates, Combine combine) {
  indexing::ScatterDims d;
  d.inserted_window_dims = iota_list(x.rank());
  d.scatter_dims_to_operand_dims = d.inserted_window_dims;
  d.index_vector_dim = index.rank();
  return indexing::scatter(b, x, point_coordinates(b, index, dim), updates, d, combine);
}

Value at_least_1d(Builder& b, const Value& v) { return v.rank() == 0 ? b.reshape(v, {1}) : v; }

void check_index_dtype(const at::Tensor& index, const char* op) {
  // As on the CPU, an empty index may have any dtype.
  TORCH_CHECK(
      index.numel() == 0 || index.scalar_type() == at::kLong || index.scalar_type() == at::kInt, op,
      "(): Expected dtype int32/int64 for index");
}

enum class ScatterReduce { Sum, Prod, Mean, Amax, Amin, None };

ScatterReduce parse_reduce(c10::string_view reduce, bool two) {
  if (two) {
    if (reduce == "sum") return ScatterReduce::Sum;
    if (reduce == "prod") return ScatterReduce::Prod;
    if (reduce == "mean") return ScatterReduce::Mean;
    if (reduce == "amax") return ScatterReduce::Amax;
    if (reduce == "amin") return ScatterReduce::Amin;
    TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ",
                reduce);
  }
  if (reduce == "add") return ScatterReduce::Sum;
  if (reduce == "multiply") return ScatterReduce::Prod;
  TORCH_CHECK(false, "reduce argument must be either add or multiply.");
}

// The common kernel of scatter / scatter_add / scatter_reduce: `src` is a tensor or
// (when undefined) the scalar `value`.
void lower_scatter(const char* name, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                   const at::Tensor& src, const c10::Scalar& value, ScatterReduce reduce,
                   bool include_self, at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_index_dtype(index, "scatter");
  if (src.defined()) {
    TORCH_CHECK(self.scalar_type() == src.scalar_type(),
                "scatter(): Expected self.dtype to be equal to src.dtype");
    at::native::scatter_shape_check(self, dim, index, src);
  } else {
    at::native::scatter_shape_check(self, dim, index);
  }
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "scatter(): Expected out tensor to have dtype ", self.scalar_type(), ", but got ",
              out.scalar_type(), " instead");
  if (!out.is_same(self)) at::native::resize_output(out, self.sizes());
  at::assert_no_internal_overlap(out);
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  check_in_range(index, dim, size);
  const c10::ScalarType type = self.scalar_type();
  Program p(name);
  auto& b = p.b();
  Value x = at_least_1d(b, p.read(self));
  if (index.numel() > 0) {
    Value idx = at_least_1d(b, p.read(index, at::kLong));
    Value upd = src.defined()
                    ? b.slice(at_least_1d(b, p.read(src)), std::vector<int64_t>(idx.rank(), 0),
                              idx.dims(), std::vector<int64_t>(idx.rank(), 1))
                    : b.broadcast_to(p.scalar(value, type), idx.dims());
    auto fill = [&](double v) { return b.broadcast_to(b.constant(v, x.element()), idx.dims()); };
    switch (reduce) {
      case ScatterReduce::None: x = scatter_points(b, x, idx, dim, upd, Combine::Replace); break;
      case ScatterReduce::Sum:
      case ScatterReduce::Prod:
      case ScatterReduce::Amax:
      case ScatterReduce::Amin: {
        Combine c = reduce == ScatterReduce::Sum    ? Combine::Add
                    : reduce == ScatterReduce::Prod ? Combine::Mul
                    : reduce == ScatterReduce::Amax ? Combine::Max
                                                    : Combine::Min;
        if (!include_self) {
          // Start each target from an identity: 0, 1, or one of its own updates.
          Value start = reduce == ScatterReduce::Sum    ? fill(0)
                        : reduce == ScatterReduce::Prod ? fill(1)
                                                        : upd;
          x = scatter_points(b, x, idx, dim, start, Combine::Replace);
        }
        x = scatter_points(b, x, idx, dim, upd, c);
        break;
      }
      case ScatterReduce::Mean: {
        Value ones = b.broadcast_to(b.constant(1, x.element()), x.dims());
        Value count = ones;
        if (!include_self) {
          x = scatter_points(b, x, idx, dim, fill(0), Combine::Replace);
          count = scatter_points(b, count, idx, dim, fill(0), Combine::Replace);
        }
        x = scatter_points(b, x, idx, dim, upd, Combine::Add);
        count = scatter_points(b, count, idx, dim, fill(1), Combine::Add);
        count = b.binary("maximum", count, ones);
        Value q = b.binary("divide", x, count);
        if (!c10::isFloatingType(type) && !c10::isComplexType(type)) {
          // Floor division (count > 0): step down when the remainder is negative.
          Value rem = b.binary("remainder", x, count);
          Value zero = b.broadcast_to(b.constant(0, x.element()), x.dims());
          q = b.select(b.compare(hlo::Compare::LT, rem, zero), b.binary("subtract", q, ones), q);
        }
        x = q;
        break;
      }
    }
  }
  p.write(out, b.reshape(x, out.sizes().vec()));
  p.run();
}

}  // namespace

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                             at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "index_select(): self and result must have the same scalar type");
  std::vector<int64_t> shape = self.sizes().vec();
  if (self.dim() > 0) shape[dim] = index.numel();
  at::native::resize_output(out, shape);
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  if (index.numel() > 0) {
    const bool dense_message = self.dim() > 1 && dim == 1;
    indexing::check_min_max(index, [dense_message, size](int64_t lo, int64_t hi) {
      int64_t bad = lo < 0 ? lo : hi;
      if (dense_message) {
        TORCH_CHECK(lo >= 0 && hi < size, "INDICES element is out of DATA bounds, id=", bad,
                    " axis_dim=", size);
      }
      TORCH_CHECK_INDEX(lo >= 0 && hi < size, "index out of range in self");
    });
  }
  static const char* const kName = "aten::index_select.out";
  PreparedCall call(kName, {&self, &index, &out}, {}, {dim});
  if (call.run()) return out;
  Program p(kName, &call);
  auto& b = p.b();
  Value x = at_least_1d(b, p.read(self));
  Value r = indexing::take_along(b, x, dim, at_least_1d(b, p.read(index, at::kLong)));
  p.write(out, b.reshape(r, shape));
  p.run();
  return out;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                       bool /*sparse_grad*/, at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_index_dtype(index, "gather");
  if (index.numel() != 0) at::native::gather_shape_check(self, dim, index);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "gather(): Expected out tensor to have dtype ", self.scalar_type(), ", but got ",
              out.scalar_type(), " instead");
  at::native::resize_output(out, index.sizes());
  check_in_range(index, dim, self.dim() == 0 ? 1 : self.size(dim));
  if (index.numel() == 0) return out;
  Program p("aten::gather.out");
  auto& b = p.b();
  Value x = at_least_1d(b, p.read(self));
  Value idx = at_least_1d(b, p.read(index, at::kLong));
  indexing::GatherDims d;
  d.collapsed_slice_dims = iota_list(x.rank());
  d.start_index_map = d.collapsed_slice_dims;
  d.slice_sizes = std::vector<int64_t>(x.rank(), 1);
  d.index_vector_dim = idx.rank();
  Value r = indexing::gather(b, x, point_coordinates(b, idx, dim), d, idx.dims());
  p.write(out, b.reshape(r, index.sizes().vec()));
  p.run();
  return out;
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  at::Tensor out = at::empty({0}, self.options());
  return gather_out(self, dim, index, sparse_grad, out);
}

at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out) {
  lower_scatter("aten::scatter.src_out", self, dim, index, src, 0, ScatterReduce::None, true, out);
  return out;
}
at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                              const c10::Scalar& value, at::Tensor& out) {
  lower_scatter("aten::scatter.value_out", self, dim, index, at::Tensor(), value,
                ScatterReduce::None, true, out);
  return out;
}
at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                               const at::Tensor& src, c10::string_view reduce, at::Tensor& out) {
  lower_scatter("aten::scatter.reduce_out", self, dim, index, src, 0, parse_reduce(reduce, false),
                true, out);
  return out;
}
at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const c10::Scalar& value, c10::string_view reduce,
                                     at::Tensor& out) {
  lower_scatter("aten::scatter.value_reduce_out", self, dim, index, at::Tensor(), value,
                parse_reduce(reduce, false), true, out);
  return out;
}
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                            const at::Tensor& src, at::Tensor& out) {
  lower_scatter("aten::scatter_add.out", self, dim, index, src, 0, ScatterReduce::Sum, true, out);
  return out;
}
at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                   const at::Tensor& src, c10::string_view reduce,
                                   bool include_self, at::Tensor& out) {
  lower_scatter("aten::scatter_reduce.two_out", self, dim, index, src, 0,
                parse_reduce(reduce, true), include_self, out);
  return out;
}

at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                          const at::Tensor& source, const c10::Scalar& alpha, at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_add_(): self (",
              self.scalar_type(), ") and source (", source.scalar_type(),
              ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), "index_add_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source.dim());
  TORCH_CHECK(index.numel() == (source.dim() == 0 ? 1 : source.size(dim)),
              "index_add_(): Number of indices (", index.numel(),
              ") should be equal to source.size(dim) (", (source.dim() == 0 ? 1 : source.size(dim)),
              ")");
  if (!out.is_same(self)) at::native::resize_output(out, self.sizes());
  at::assert_no_internal_overlap(out);
  check_in_range(index, dim, self.dim() == 0 ? 1 : self.size(dim));
  Program p("aten::index_add.out");
  auto& b = p.b();
  Value x = at_least_1d(b, p.read(self));
  if (index.numel() > 0) {
    std::vector<int64_t> update_dims = x.dims();
    update_dims[dim] = index.numel();
    Value upd = b.reshape(p.read(source), update_dims);
    if (!(alpha.isIntegral(true) && alpha.to<int64_t>() == 1)) {
      upd = b.binary("multiply", upd,
                     b.broadcast_to(p.scalar(alpha, self.scalar_type()), update_dims));
    }
    x = indexing::put_along(b, x, dim, at_least_1d(b, p.read(index, at::kLong)), upd, Combine::Add);
  }
  p.write(out, b.reshape(x, self.sizes().vec()));
  p.run();
  return out;
}

namespace {

// PyTorch's index_copy meta checks (TORCH_META_FUNC(index_copy)), in its order and words.
void check_index_copy(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                      const at::Tensor& source) {
  TORCH_CHECK_INDEX(index.dim() < 2, "index_copy_(): Index should have dimension 1 or 0 (got ",
                    index.dim(), ")");
  const int64_t numel = index.numel();
  if (source.dim() == 0 && numel != 1) {
    TORCH_CHECK_INDEX(false,
                      "index_copy_(): When source is scalar, index should have one element (got ",
                      numel, ")");
  } else if (source.dim() != self.dim() && source.dim() != 0 && self.dim() != 0) {
    TORCH_CHECK_INDEX(false,
                      "index_copy_(): When source and destination are not scalars, their "
                      "dimensionality must match. Source dimensionality (",
                      source.dim(), "), destination dimensionality (", self.dim(), ")");
  }
  TORCH_CHECK(index.scalar_type() == at::kLong,
              "index_copy_(): Expected a long tensor for index, but got ", index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "index_copy_(): self and source expected to have the same dtype, but got (self) ",
              self.scalar_type(), " and (source) ", source.scalar_type());
  auto sliced = [dim](const at::Tensor& t) {
    std::vector<int64_t> sizes = t.sizes().vec();
    if (!sizes.empty()) sizes.erase(sizes.begin() + dim);
    return sizes;
  };
  std::vector<int64_t> self_slice = sliced(self), source_slice = sliced(source);
  if (self_slice != source_slice) {
    std::ostringstream message;
    message << "index_copy_(): Source/destination tensor must have same slice shapes. "
            << "Destination slice shape: ";
    for (size_t i = 0; i < self_slice.size(); ++i) message << (i ? " " : "") << self_slice[i];
    message << " at dimension " << dim << " and source slice shape: ";
    for (size_t i = 0; i < source_slice.size(); ++i) message << (i ? " " : "") << source_slice[i];
    message << " at dimension 0.";
    TORCH_CHECK(false, message.str());
  }
  TORCH_CHECK_INDEX(source.dim() == 0 || numel == source.size(dim),
                    "index_copy_(): Number of indices (", numel,
                    ") should be equal to source.size(dim) (", source.size(dim), ")");
}

}  // namespace

at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                           const at::Tensor& source, at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_index_copy(self, dim, index, source);
  if (!out.is_same(self)) at::native::resize_output(out, self.sizes());
  at::assert_no_internal_overlap(out);
  const int64_t size = self.dim() == 0 ? 1 : self.size(dim);
  if (index.numel() > 0) {
    indexing::check_min_max(index, [dim, size](int64_t lo, int64_t hi) {
      int64_t bad = lo < 0 ? lo : hi;
      TORCH_CHECK_INDEX(lo >= 0 && hi < size, "index_copy_(): index ", bad,
                        " is out of bounds for dimension ", dim, " with size ", size);
    });
  }
  Program p("aten::index_copy.out");
  auto& b = p.b();
  Value x = at_least_1d(b, p.read(self));
  if (index.numel() > 0) {
    std::vector<int64_t> update_dims = x.dims();
    update_dims[dim] = index.numel();
    Value updates = b.reshape(p.read(source), update_dims);
    // Repeated indices: one of the rows wins, as on the CPU (which keeps the last).
    x = indexing::put_along(b, x, dim, at_least_1d(b, p.read(index, at::kLong)), updates,
                            Combine::Replace);
  }
  p.write(out, b.reshape(x, self.sizes().vec()));
  p.run();
  return out;
}

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices,
                                    int64_t num_weights, int64_t padding_idx,
                                    bool scale_grad_by_freq) {
  const int64_t n = indices.numel();
  const int64_t width = grad_output.size(-1);
  at::Tensor out = at::empty({num_weights, width}, grad_output.options());
  const c10::ScalarType math = opmath_type(grad_output.scalar_type());
  static const char* const kName = "aten::embedding_dense_backward";
  const c10::Scalar padding(padding_idx);  // a run-time operand; only its sign shapes the program
  PreparedCall call(kName, {&grad_output, &indices, &out}, {&padding},
                    {padding_idx >= 0, scale_grad_by_freq});
  if (call.run()) return out;
  Program p(kName, &call);
  auto& b = p.b();
  const hlo::ElementType e = element_type(math);
  Value result = b.broadcast_to(b.constant(0, e), {num_weights, width});
  if (n > 0 && num_weights > 0) {
    Value g = b.reshape(p.read(grad_output, math), {n, width});
    Value idx = b.reshape(p.read(indices, at::kLong), {n});
    Value zero = b.broadcast_to(b.constant(0, e), {n, width});
    if (padding_idx >= 0) {
      Value pad = b.broadcast_to(p.scalar(padding, at::kLong), {n});
      Value hit = b.broadcast_in_dim(b.compare(hlo::Compare::EQ, idx, pad), {n, width}, {0});
      g = b.select(hit, zero, g);
    }
    if (scale_grad_by_freq) {
      Value counts = indexing::put_along(b, b.broadcast_to(b.constant(0, e), {num_weights}), 0, idx,
                                         b.broadcast_to(b.constant(1, e), {n}), Combine::Add);
      Value per_row = indexing::take_along(b, counts, 0, idx);
      g = b.binary("divide", g, b.broadcast_in_dim(per_row, {n, width}, {0}));
    }
    result = indexing::put_along(b, result, 0, idx, g, Combine::Add);
  }
  p.write(out, result);
  p.run();
  return out;
}

}  // namespace tpu::aten
