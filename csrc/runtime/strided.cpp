#include "runtime/strided.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

namespace tpu::runtime {

namespace {

using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;

// The dimensions that address memory: size > 1 and stride != 0, ordered by stride,
// largest first (ties keep their order).
std::vector<int64_t> memory_order(const StridedView& view) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < view.sizes.size(); ++d) {
    if (view.sizes[d] > 1 && view.strides[d] != 0) dims.push_back(static_cast<int64_t>(d));
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int64_t a, int64_t b) { return view.strides[a] > view.strides[b]; });
  return dims;
}

// Whether the addressing dimensions nest without overlap (each stride a multiple of
// the next one's span), so the view is a strided box of a reshaped range.
bool is_box(const StridedView& view, const std::vector<int64_t>& order) {
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t stride = view.strides[order[i]];
    if (stride < 0) return false;
    if (i + 1 < order.size()) {
      int64_t inner = order[i + 1];
      int64_t span = view.strides[inner] * view.sizes[inner];
      if (stride % view.strides[inner] != 0 || stride < span) return false;
    }
  }
  return true;
}

// Flat storage index of every element of the view, as an s64 tensor of shape sizes.
Value flat_indices(hlo::Builder& b, const StridedView& view) {
  TensorType type{ElementType::S64, view.sizes};
  Value start = view.offset_operand.has_value()
                    ? *view.offset_operand
                    : b.constant(static_cast<double>(view.offset), ElementType::S64);
  Value index = b.broadcast_to(start, view.sizes);
  for (size_t d = 0; d < view.sizes.size(); ++d) {
    if (view.sizes[d] <= 1 || view.strides[d] == 0) continue;
    Value step = b.broadcast_to(b.constant(static_cast<double>(view.strides[d]), ElementType::S64),
                                view.sizes);
    index =
        b.binary("add", index, b.binary("multiply", b.iota(type, static_cast<int64_t>(d)), step));
  }
  return index;
}

// Broadcasts `compact` (the view's addressing dimensions `order`, in that order) back
// to the view's shape: transposes to increasing dimension order, then re-inserts the
// size-1 and stride-0 dimensions.
Value expand_to_view(hlo::Builder& b, const Value& compact, const StridedView& view,
                     const std::vector<int64_t>& order) {
  std::vector<int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> permutation;
  for (int64_t d : sorted) {
    permutation.push_back(std::find(order.begin(), order.end(), d) - order.begin());
  }
  Value in_order = b.transpose(compact, permutation);
  bool any_broadcast = false;
  for (size_t d = 0; d < view.sizes.size(); ++d) {
    any_broadcast = any_broadcast || (view.sizes[d] > 1 && view.strides[d] == 0);
  }
  if (!any_broadcast) return b.reshape(in_order, view.sizes);
  return b.broadcast_in_dim(in_order, view.sizes, sorted);
}

}  // namespace

int64_t StridedView::numel() const {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<int64_t>());
}

bool StridedView::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

bool StridedView::covers_exactly(int64_t storage_elements) const {
  if (offset != 0 || numel() != storage_elements) return false;
  std::vector<int64_t> order = memory_order(*this);
  int64_t expected = 1;
  for (size_t i = order.size(); i-- > 0;) {
    if (strides[order[i]] != expected) return false;
    expected *= sizes[order[i]];
  }
  return expected == storage_elements;
}

// [offset, offset + length) of `storage`, with the offset known when compiling or passed
// at run time. A run-time range may reach `overhang` elements past the end (the box
// reads below never select them): the storage is zero-padded by that much first.
Value storage_range(hlo::Builder& b, const Value& storage, const StridedView& view, int64_t length,
                    int64_t overhang) {
  const int64_t n = storage.dims().at(0);
  if (!view.offset_operand.has_value()) {
    const int64_t available = std::min(length, n - view.offset);
    Value range = b.slice(storage, {view.offset}, {view.offset + available}, {1});
    if (available < length) {
      range = b.pad(range, b.constant(0, storage.element()), {0}, {length - available}, {0});
    }
    return range;
  }
  Value padded = storage;
  if (overhang > 0) {
    padded = b.pad(storage, b.constant(0, storage.element()), {0}, {overhang}, {0});
  }
  return b.dynamic_slice(padded, {*view.offset_operand}, {length});
}

Value read_strided(hlo::Builder& b, const Value& storage, const StridedView& view) {
  if (view.numel() == 0) {
    return b.broadcast_to(b.constant(0, storage.element()), view.sizes);
  }
  if (view.offset_operand.has_value()) {
    if (view.is_contiguous()) {
      return b.reshape(storage_range(b, storage, view, view.numel(), 0), view.sizes);
    }
    std::vector<int64_t> order = memory_order(view);
    if (!is_box(view, order)) return b.gather_1d(storage, flat_indices(b, view));
  }
  if (view.is_contiguous()) {
    Value range = b.slice(storage, {view.offset}, {view.offset + view.numel()}, {1});
    return b.reshape(range, view.sizes);
  }
  std::vector<int64_t> order = memory_order(view);
  if (!is_box(view, order)) return b.gather_1d(storage, flat_indices(b, view));
  if (order.empty()) {  // a single element, broadcast
    Value one = b.reshape(storage_range(b, storage, view, 1, 0), {});
    return b.broadcast_to(one, view.sizes);
  }
  // Take the range [offset, offset + size0 * stride0) (zero-padded past the end of
  // the storage: the padding is never selected), reshape it to the box
  // [size0, stride0/stride1, ..., stride_last], and keep the leading corner.
  const int64_t outer = order.front();
  const int64_t length = view.sizes[outer] * view.strides[outer];
  int64_t last = 0;  // the view's last element, relative to the offset
  for (int64_t d : order) last += (view.sizes[d] - 1) * view.strides[d];
  std::vector<int64_t> box{view.sizes[outer]};
  for (size_t i = 1; i < order.size(); ++i) {
    box.push_back(view.strides[order[i - 1]] / view.strides[order[i]]);
  }
  box.push_back(view.strides[order.back()]);
  std::vector<int64_t> start(box.size(), 0), limit, step(box.size(), 1);
  for (int64_t d : order) limit.push_back(view.sizes[d]);
  limit.push_back(1);
  std::vector<int64_t> compact_dims(limit.begin(), limit.end() - 1);
  // A constant offset that fits inside the box (q, k and v of one projection: offsets
  // within a row) becomes the box's corner, and the range starts at a row: no padding,
  // which XLA would otherwise fill as a copy of the storage.
  std::optional<int64_t> first;
  if (!view.offset_operand.has_value()) {
    int64_t rest = view.offset % view.strides[outer];
    first = view.offset - rest;
    bool fits = *first + length <= storage.dims().at(0);
    for (size_t i = 1; i <= order.size(); ++i) {
      const int64_t stride = i < order.size() ? view.strides[order[i]] : 1;
      start[i] = rest / stride;
      rest %= stride;
      fits = fits && start[i] + limit[i] <= box[i];
    }
    if (!fits) {
      first.reset();
      std::fill(start.begin(), start.end(), 0);
    }
  }
  if (first.has_value()) {
    for (size_t i = 1; i < limit.size(); ++i) limit[i] += start[i];
  }
  Value range = first.has_value() ? b.slice(storage, {*first}, {*first + length}, {1})
                                  : storage_range(b, storage, view, length, length - (last + 1));
  Value boxed = b.reshape(range, box);
  Value compact = b.reshape(b.slice(boxed, start, limit, step), compact_dims);
  return expand_to_view(b, compact, view, order);
}

Value write_strided(hlo::Builder& b, const Value& storage, const StridedView& view,
                    const Value& values) {
  const int64_t n = storage.dims().at(0);
  if (view.numel() == 0) return storage;
  if (view.covers_exactly(n)) return dense_storage(b, view, values);
  if (view.is_contiguous()) {
    Value flat = b.reshape(values, {view.numel()});
    Value start = view.offset_operand.has_value()
                      ? *view.offset_operand
                      : b.constant(static_cast<double>(view.offset), ElementType::S64);
    return b.dynamic_update_slice(storage, flat, {start});
  }
  return b.scatter_1d(storage, flat_indices(b, view), values);
}

Value dense_storage(hlo::Builder& b, const StridedView& view, const Value& values,
                    std::vector<int64_t>* shape) {
  std::vector<int64_t> order = memory_order(view);
  std::vector<int64_t> permutation = order;
  for (size_t d = 0; d < view.sizes.size(); ++d) {
    if (std::find(order.begin(), order.end(), static_cast<int64_t>(d)) == order.end()) {
      permutation.push_back(static_cast<int64_t>(d));  // size-1 dims: any position
    }
  }
  Value ordered = b.transpose(values, permutation);
  if (shape != nullptr) *shape = ordered.dims();
  return b.reshape(ordered, {view.numel()});
}

Value reinterpret(hlo::Builder& b, const Value& storage, ElementType type) {
  const ElementType from = storage.element();
  if (from == type) return storage;
  // Booleans have no bit pattern in StableHLO: go through u8 (they are 0/1 bytes).
  if (from == ElementType::Pred) return reinterpret(b, b.convert(storage, ElementType::U8), type);
  // Complex numbers have no bit cast either: they are (real, imaginary) float pairs.
  if (hlo::is_complex(from)) {
    const int64_t n = storage.dims().at(0);
    Value re = b.reshape(b.complex_parts(storage, false), {n, 1});
    Value im = b.reshape(b.complex_parts(storage, true), {n, 1});
    return reinterpret(b, b.reshape(b.concatenate({re, im}, 1), {2 * n}), type);
  }
  if (hlo::is_complex(type)) {
    ElementType part = type == ElementType::C64 ? ElementType::F32 : ElementType::F64;
    Value floats = reinterpret(b, storage, part);
    const int64_t n = floats.dims().at(0);
    if (n % 2 != 0) {
      throw std::invalid_argument("cannot view an odd number of floats as complex numbers");
    }
    Value pairs = b.reshape(floats, {n / 2, 2});
    Value re = b.reshape(b.slice(pairs, {0, 0}, {n / 2, 1}, {1, 1}), {n / 2});
    Value im = b.reshape(b.slice(pairs, {0, 1}, {n / 2, 2}, {1, 1}), {n / 2});
    return b.make_complex(re, im);
  }
  if (type == ElementType::Pred) {
    Value bytes = reinterpret(b, storage, ElementType::U8);
    return b.compare(hlo::Compare::NE, bytes,
                     b.broadcast_to(b.constant(0, ElementType::U8), bytes.dims()));
  }
  const int64_t from_size = static_cast<int64_t>(hlo::byte_size(from));
  const int64_t to_size = static_cast<int64_t>(hlo::byte_size(type));
  const int64_t n = storage.dims().at(0);
  if ((n * from_size) % to_size != 0) {
    throw std::invalid_argument("cannot view " + std::to_string(n * from_size) +
                                " bytes as elements of " + hlo::mlir_name(type));
  }
  if (from_size == to_size) return b.bitcast_convert(storage, TensorType{type, {n}});
  if (from_size > to_size) {
    Value split = b.bitcast_convert(storage, TensorType{type, {n, from_size / to_size}});
    return b.reshape(split, {n * from_size / to_size});
  }
  int64_t ratio = to_size / from_size;
  if (n % ratio != 0) {
    // A byte length that is a multiple of to_size but not from element-aligned cannot happen
    // (from_size divides to_size); kept as an internal check.
    throw std::logic_error("reinterpret: misaligned storage");
  }
  Value grouped = b.reshape(storage, {n / ratio, ratio});
  return b.bitcast_convert(grouped, TensorType{type, {n / ratio}});
}

}  // namespace tpu::runtime
