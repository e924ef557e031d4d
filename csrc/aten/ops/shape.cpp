// Shape ops that move data: cat, flip, roll, tril/triu, constant_pad_nd and the
// reflection/replication pads with their backwards. (stack and repeat are composite
// over cat and expand/copy.) Reflection and replication padding are a gather along
// each padded dimension with a shape-only index map; their backward is the matching
// scatter-add.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Padding.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>

#include "aten/dtype.h"
#include "aten/ops/indexing.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::TensorType;
using hlo::Value;

bool legacy_empty(const at::Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

std::vector<int64_t> cat_shape(const at::ITensorListRef& tensors, int64_t& dim) {
  std::vector<at::Tensor> list(tensors.begin(), tensors.end());
  TORCH_CHECK_VALUE(!list.empty(), "torch.cat(): expected a non-empty list of Tensors");
  for (size_t i = 0; i < list.size(); ++i) {
    TORCH_CHECK(list[i].dim() > 0, "zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
  }
  int64_t ref = -1;
  for (size_t i = 0; i < list.size() && ref < 0; ++i)
    if (!legacy_empty(list[i])) ref = static_cast<int64_t>(i);
  if (ref < 0) return {0};  // only legacy empties: the CPU leaves dim unchecked
  const at::Tensor& first = list[ref];
  dim = at::maybe_wrap_dim(dim, first.dim());
  std::vector<int64_t> shape = first.sizes().vec();
  shape[dim] = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const at::Tensor& t = list[i];
    if (legacy_empty(t)) continue;
    TORCH_CHECK(t.dim() == first.dim(), "Tensors must have same number of dimensions: got ",
                first.dim(), " and ", t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d == dim) continue;
      TORCH_CHECK(t.size(d) == first.size(d), "Sizes of tensors must match except in dimension ",
                  dim, ". Expected size ", first.size(d), " but got size ", t.size(d),
                  " for tensor number ", i, " in the list.");
    }
    shape[dim] += t.size(dim);
  }
  return shape;
}

// The memory format of cat's result: the parts' own where they all share it, else contiguous.
c10::MemoryFormat cat_format(const at::ITensorListRef& tensors) {
  std::optional<c10::MemoryFormat> format;
  for (const at::Tensor& t : tensors) {
    if (legacy_empty(t)) continue;
    c10::MemoryFormat f = t.suggest_memory_format();
    format = !format.has_value() || *format == f ? f : c10::MemoryFormat::Contiguous;
  }
  return format.value_or(c10::MemoryFormat::Contiguous);
}

void lower_cat(const at::ITensorListRef& tensors, int64_t dim, const at::Tensor& out) {
  if (out.numel() == 0) return;
  static const char* const kName = "aten::cat.out";
  // The parts' sizes (which are empty and left out) and dtypes are in the call's signature.
  const std::vector<at::Tensor> list(tensors.begin(), tensors.end());
  std::vector<const at::Tensor*> slots;
  slots.reserve(list.size() + 1);
  for (const at::Tensor& t : list) slots.push_back(&t);
  slots.push_back(&out);
  PreparedCall call(kName, slots, {}, {dim});
  if (call.run()) return;
  Program p(kName, &call);
  std::vector<Value> parts;
  for (const at::Tensor& t : list) {
    if (legacy_empty(t) || t.numel() == 0) continue;
    parts.push_back(p.read(t, out.scalar_type()));
  }
  p.write(out, parts.size() == 1 ? parts[0] : p.b().concatenate(parts, dim));
  p.run();
}

// Index map of a reflect/replicate pad along a dimension of size n.
std::vector<int64_t> pad_map(int64_t n, int64_t left, int64_t right, bool reflect) {
  std::vector<int64_t> map;
  for (int64_t o = 0; o < n + left + right; ++o) {
    int64_t i = o - left;
    if (reflect) {
      if (i < 0) i = -i;
      if (i >= n) i = 2 * (n - 1) - i;
    } else {
      i = std::min(std::max<int64_t>(i, 0), n - 1);
    }
    map.push_back(i);
  }
  return map;
}

// Checks of the CPU kernels; returns the output shape. `pad` = (left, right[, top, bottom]).
std::vector<int64_t> pad_shape(const at::Tensor& input, c10::IntArrayRef pad, int spatial,
                               bool reflect) {
  if (spatial == 1) {
    at::native::padding::check_valid_input<1>(input, pad);
  } else {
    at::native::padding::check_valid_input<2>(input, pad);
  }
  std::vector<int64_t> shape = input.sizes().vec();
  const char* names[] = {"W", "H"};
  for (int k = 0; k < spatial; ++k) {
    const int64_t d = input.dim() - 1 - k;
    const int64_t n = input.size(d), l = pad[2 * k], r = pad[2 * k + 1];
    if (reflect) {
      TORCH_CHECK(l < n && r < n, "Argument #", 4 + 2 * k,
                  ": Padding size should be less than the corresponding input dimension, but "
                  "got: padding (",
                  l, ", ", r, ") at dimension ", d, " of input ", input.sizes());
    }
    TORCH_CHECK(n + l + r >= 1, "input (", names[k], ": ", n, ") is too small. Calculated output ",
                names[k], ": ", n + l + r);
    shape[d] = n + l + r;
  }
  return shape;
}

void lower_pad(const char* name, const at::Tensor& input, c10::IntArrayRef pad, int spatial,
               bool reflect, const at::Tensor& out) {
  if (out.numel() == 0) return;
  Program p(name);
  auto& b = p.b();
  Value x = p.read(input);
  for (int k = 0; k < spatial; ++k) {
    const int64_t d = input.dim() - 1 - k;
    Value map = b.constant_i64(pad_map(input.size(d), pad[2 * k], pad[2 * k + 1], reflect));
    x = indexing::take_along(b, x, d, map);
  }
  p.write(out, x);
  p.run();
}

void lower_pad_backward(const char* name, const at::Tensor& grad, const at::Tensor& input,
                        c10::IntArrayRef pad, int spatial, bool reflect, at::Tensor& grad_input) {
  std::vector<int64_t> shape = pad_shape(input, pad, spatial, reflect);
  TORCH_CHECK(grad.sizes() == c10::IntArrayRef(shape), "grad_output has shape ", grad.sizes(),
              " but the padded input has shape ", c10::IntArrayRef(shape));
  at::native::resize_output(grad_input, input.sizes());
  if (grad_input.numel() == 0) return;
  const c10::ScalarType math = opmath_type(grad.scalar_type());
  Program p(name);
  auto& b = p.b();
  Value g = p.read(grad, math);
  for (int k = spatial - 1; k >= 0; --k) {
    const int64_t d = input.dim() - 1 - k;
    std::vector<int64_t> dims = g.dims();
    dims[d] = input.size(d);
    Value zeros = b.broadcast_to(b.constant(0, element_type(math)), dims);
    Value map = b.constant_i64(pad_map(input.size(d), pad[2 * k], pad[2 * k + 1], reflect));
    g = indexing::put_along(b, zeros, d, map, g, indexing::Combine::Add);
  }
  p.write(grad_input, g);
  p.run();
}

void lower_tri(const char* name, const at::Tensor& self, int64_t diagonal, bool lower,
               const at::Tensor& out) {
  if (out.numel() == 0) return;
  Program p(name);
  auto& b = p.b();
  Value x = p.read(self);
  const int64_t r = x.rank();
  TensorType index{hlo::ElementType::S64, x.dims()};
  Value offset = b.binary("subtract", b.iota(index, r - 1), b.iota(index, r - 2));
  Value diag = b.broadcast_to(p.scalar(diagonal, at::kLong), x.dims());
  Value keep = b.compare(lower ? hlo::Compare::LE : hlo::Compare::GE, offset, diag);
  p.write(out, b.select(keep, x, b.broadcast_to(b.constant(0, x.element()), x.dims())));
  p.run();
}

at::Tensor& tri_out(const char* name, const at::Tensor& self, int64_t diagonal, bool lower,
                    at::Tensor& out) {
  TORCH_CHECK(self.dim() >= 2, lower ? "tril" : "triu",
              ": input tensor must have at least 2 dimensions");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  if (!out.is_same(self)) {
    at::native::resize_output(out, self.sizes());
    at::assert_no_overlap(out, self);
  }
  lower_tri(name, self, diagonal, lower, out);
  return out;
}

}  // namespace

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  std::vector<int64_t> shape = cat_shape(tensors, dim);
  c10::ScalarType type = at::native::result_type(tensors);
  TORCH_CHECK(at::canCast(type, out.scalar_type()), "torch.cat(): input types can't be cast to ",
              "the desired output type ", out.scalar_type());
  at::assert_no_internal_overlap(out);
  for (const at::Tensor& t : tensors) at::assert_no_overlap(out, t);
  // An out= of another shape is resized into the parts' common format, as a new result is.
  if (at::native::resize_output(out, shape)) {
    out.unsafeGetTensorImpl()->empty_tensor_restride(cat_format(tensors));
  }
  lower_cat(tensors, dim, out);
  return out;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<int64_t> shape = cat_shape(tensors, dim);
  c10::ScalarType type = at::native::result_type(tensors);
  const at::Tensor& first = *tensors.begin();
  at::Tensor out = at::empty(shape, first.options().dtype(type).memory_format(cat_format(tensors)));
  lower_cat(tensors, dim, out);
  return out;
}

at::Tensor flip(const at::Tensor& self, c10::IntArrayRef dims) {
  std::bitset<at::dim_bitset_size> mask = at::dim_list_to_bitset(dims, self.dim());
  at::Tensor out = at::empty(self.sizes(), self.options());
  if (out.numel() == 0) return out;
  std::vector<int64_t> reversed;
  for (int64_t d = 0; d < self.dim(); ++d)
    if (mask[d]) reversed.push_back(d);
  Program p("aten::flip");
  Value x = p.read(self);
  p.write(out, reversed.empty()
                   ? x
                   : p.b().op("reverse", {x}, x.type, "dimensions = " + hlo::i64_array(reversed)));
  p.run();
  return out;
}

at::Tensor roll(const at::Tensor& self, c10::IntArrayRef shifts, c10::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1) {
    return tpu::aten::roll(self.flatten(), shifts, c10::IntArrayRef{0}).view(self.sizes());
  }
  TORCH_CHECK(shifts.size() == dims.size(),
              "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  at::Tensor out = at::empty(self.sizes(), self.options());
  if (out.numel() == 0) return out;
  Program p("aten::roll");
  auto& b = p.b();
  Value x = p.read(self);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = at::maybe_wrap_dim(dims[i], self.dim());
    const int64_t n = self.size(d);
    const int64_t s = ((shifts[i] % n) + n) % n;
    if (s == 0) continue;
    std::vector<int64_t> zero(x.rank(), 0), ones(x.rank(), 1), limit = x.dims(), start(x.rank(), 0);
    start[d] = n - s;
    Value tail = b.slice(x, start, limit, ones);
    limit[d] = n - s;
    Value head = b.slice(x, zero, limit, ones);
    x = b.concatenate({tail, head}, d);
  }
  p.write(out, x);
  p.run();
  return out;
}

at::Tensor& tril_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  return tri_out("aten::tril.out", self, diagonal, true, out);
}
at::Tensor& triu_out(const at::Tensor& self, int64_t diagonal, at::Tensor& out) {
  return tri_out("aten::triu.out", self, diagonal, false, out);
}
at::Tensor tril(const at::Tensor& self, int64_t diagonal) {
  at::Tensor out = at::empty({0}, self.options());
  return tril_out(self, diagonal, out);
}
at::Tensor triu(const at::Tensor& self, int64_t diagonal) {
  at::Tensor out = at::empty({0}, self.options());
  return triu_out(self, diagonal, out);
}
at::Tensor& tril_(at::Tensor& self, int64_t diagonal) {
  at::assert_no_internal_overlap(self);
  return tri_out("aten::tril_", self, diagonal, true, self);
}
at::Tensor& triu_(at::Tensor& self, int64_t diagonal) {
  at::assert_no_internal_overlap(self);
  return tri_out("aten::triu_", self, diagonal, false, self);
}

at::Tensor constant_pad_nd(const at::Tensor& self, c10::IntArrayRef pad, const c10::Scalar& value) {
  TORCH_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  const int64_t rank = self.dim();
  TORCH_CHECK(static_cast<int64_t>(pad.size()) / 2 <= rank,
              "Length of pad should be no more than twice the number of dimensions of the "
              "input. Dimension of input is ",
              rank, " but length of pad is ", pad.size());
  std::vector<int64_t> low(rank, 0), high(rank, 0), shape = self.sizes().vec();
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    const int64_t d = rank - 1 - static_cast<int64_t>(k);
    low[d] = pad[2 * k];
    high[d] = pad[2 * k + 1];
    shape[d] += low[d] + high[d];
    TORCH_CHECK(shape[d] >= 0, "The input size ", self.size(d), ", plus negative padding ", low[d],
                " and ", high[d], " resulted in a negative output size, which is invalid. ",
                "Check dimension ", d, " of your input.");
  }
  at::Tensor out = at::empty(shape, self.options().memory_format(self.suggest_memory_format()));
  if (out.numel() == 0) return out;
  Program p("aten::constant_pad_nd");
  auto& b = p.b();
  Value fill = p.scalar(value, self.scalar_type());
  Value x;
  if (self.numel() == 0) {
    x = b.broadcast_to(fill, shape);
  } else {
    x = b.pad(p.read(self), fill, low, high, std::vector<int64_t>(rank, 0));
  }
  p.write(out, x);
  p.run();
  return out;
}

#define TPU_PAD_KERNELS(name, spatial, reflect)                                                    \
  at::Tensor& name##_out(const at::Tensor& self, c10::IntArrayRef pad, at::Tensor& out) {          \
    std::vector<int64_t> shape = pad_shape(self, pad, spatial, reflect);                           \
    TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ",     \
                self.scalar_type(), ", but got ", out.scalar_type(), " instead");                  \
    at::native::resize_output(out, shape);                                                         \
    lower_pad("aten::" #name, self, pad, spatial, reflect, out);                                   \
    return out;                                                                                    \
  }                                                                                                \
  at::Tensor name(const at::Tensor& self, c10::IntArrayRef pad) {                                  \
    at::Tensor out = at::empty({0}, self.options());                                               \
    return name##_out(self, pad, out);                                                             \
  }                                                                                                \
  at::Tensor& name##_backward_out(const at::Tensor& grad, const at::Tensor& self,                  \
                                  c10::IntArrayRef pad, at::Tensor& grad_input) {                  \
    lower_pad_backward("aten::" #name "_backward", grad, self, pad, spatial, reflect, grad_input); \
    return grad_input;                                                                             \
  }                                                                                                \
  at::Tensor name##_backward(const at::Tensor& grad, const at::Tensor& self,                       \
                             c10::IntArrayRef pad) {                                               \
    at::Tensor grad_input = at::empty({0}, grad.options());                                        \
    return name##_backward_out(grad, self, pad, grad_input);                                       \
  }

TPU_PAD_KERNELS(reflection_pad1d, 1, true)
TPU_PAD_KERNELS(reflection_pad2d, 2, true)
TPU_PAD_KERNELS(replication_pad1d, 1, false)
TPU_PAD_KERNELS(replication_pad2d, 2, false)
#undef TPU_PAD_KERNELS

}  // namespace tpu::aten
