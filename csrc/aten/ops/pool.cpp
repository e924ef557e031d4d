// 2-d pooling: max_pool2d_with_indices (+backward), avg_pool2d (+backward) and
// _adaptive_avg_pool2d (+backward), with PyTorch's padding, ceil_mode, dilation and
// divisor rules. Windows are stablehlo.reduce_window; max pooling carries the flat
// (h * W + w) index of the winner beside its value, as PyTorch returns it.
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include <limits>
#include <string>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;

struct Pool {
  int64_t kernel[2], stride[2], padding[2], dilation[2];
  int64_t in[2], out[2];
  int64_t pad_high[2];  // padding after the input, ceil_mode windows included
};

// PyTorch's own checks (ATen/native/Pool.h, in the order max_pool2d's and avg_pool2d's meta
// functions call them), so errors are the CPU's word for word, and its output sizes.
Pool make_pool(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
               c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode,
               const char* name, bool max_pool) {
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2, name,
              ": kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, name,
              ": stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2, name,
              ": padding must either be a single int, or a tuple of two ints");
  const at::MemoryFormat format = self.suggest_memory_format();
  if (max_pool) {
    TORCH_CHECK(dilation.size() == 1 || dilation.size() == 2, name,
                ": dilation must be either a single int, or a tuple of two ints");
    if (format == at::MemoryFormat::ChannelsLast) {
      TORCH_CHECK(self.dim() == 4,
                  "non-empty 4D (batch mode) tensor expected for input with channels_last layout");
    } else {
      TORCH_CHECK(self.dim() == 3 || self.dim() == 4,
                  "non-empty 3D or 4D (batch mode) tensor expected for input");
    }
  }
  // Planes, height, width: read in avg_pool2d's order, whose meta has no rank check (an
  // IndexError for fewer than 3 dimensions, as on the CPU).
  const int64_t planes = self.size(-3);
  Pool p{};
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = kernel[kernel.size() == 1 ? 0 : i];
    p.stride[i] = stride.empty() ? p.kernel[i] : stride[stride.size() == 1 ? 0 : i];
    p.padding[i] = padding[padding.size() == 1 ? 0 : i];
    p.dilation[i] = max_pool ? dilation[dilation.size() == 1 ? 0 : i] : 1;
    p.in[i] = self.size(-2 + i);
    p.out[i] = at::native::pooling_output_shape<int64_t>(p.in[i], p.kernel[i], p.padding[i],
                                                         p.stride[i], p.dilation[i], ceil_mode);
  }
  at::native::pool2d_shape_check(self, p.kernel[0], p.kernel[1], p.stride[0], p.stride[1],
                                 p.padding[0], p.padding[1], p.dilation[0], p.dilation[1],
                                 planes, p.in[0], p.in[1], p.out[0], p.out[1], format);
  for (int i = 0; i < 2; ++i) {
    p.pad_high[i] = (p.out[i] - 1) * p.stride[i] + p.dilation[i] * (p.kernel[i] - 1) + 1 - p.in[i] -
                    p.padding[i];
    if (p.pad_high[i] < 0) p.pad_high[i] = 0;
  }
  return p;
}

// A result or gradient laid out as the CPU lays it out: in the input's suggested memory
// format (channels_last stays channels_last).
at::Tensor empty_as_input(c10::IntArrayRef shape, const at::Tensor& self, c10::ScalarType type) {
  return at::empty(shape, self.options().dtype(type).memory_format(self.suggest_memory_format()));
}

std::vector<int64_t> out_shape(const at::Tensor& self, const Pool& p) {
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - 2);
  shape.push_back(p.out[0]);
  shape.push_back(p.out[1]);
  return shape;
}

// reduce_window over the last two dims of 4-d values.
std::vector<Value> window(Builder& b, const std::vector<Value>& operands,
                          const std::vector<Value>& inits, const Pool& p,
                          const std::vector<int64_t>& result_dims, const std::string& region,
                          bool dilate) {
  std::string attributes = "padding = dense<[[0, 0], [0, 0], [" + std::to_string(p.padding[0]) +
                           ", " + std::to_string(p.pad_high[0]) + "], [" +
                           std::to_string(p.padding[1]) + ", " + std::to_string(p.pad_high[1]) +
                           "]]> : tensor<4x2xi64>, window_dimensions = " +
                           hlo::i64_array({1, 1, p.kernel[0], p.kernel[1]}) +
                           ", window_strides = " + hlo::i64_array({1, 1, p.stride[0], p.stride[1]});
  if (dilate) {
    attributes += ", window_dilations = " + hlo::i64_array({1, 1, p.dilation[0], p.dilation[1]});
  }
  std::vector<Value> all = operands;
  all.insert(all.end(), inits.begin(), inits.end());
  std::vector<TensorType> results;
  for (const Value& v : operands) results.push_back(TensorType{v.element(), result_dims});
  return b.op_multi("reduce_window", all, results, attributes, region);
}

// Views a 3-d (C, H, W) tensor's value as 4-d (1, C, H, W).
Value as_4d(Builder& b, const Value& v) {
  if (v.rank() == 4) return v;
  std::vector<int64_t> dims{1};
  dims.insert(dims.end(), v.dims().begin(), v.dims().end());
  return b.reshape(v, dims);
}

std::vector<int64_t> dims_4d(std::vector<int64_t> dims) {
  if (dims.size() == 3) dims.insert(dims.begin(), 1);
  return dims;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(
    const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
  Pool pool =
      make_pool(self, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d", true);
  std::vector<int64_t> shape = out_shape(self, pool);
  at::Tensor out = empty_as_input(shape, self, self.scalar_type());
  at::Tensor indices = empty_as_input(shape, self, c10::kLong);
  if (out.numel() == 0) return {out, indices};
  Program program("aten::max_pool2d_with_indices");
  Builder& b = program.b();
  Value x = as_4d(b, program.read(self));
  TensorType index_type{ElementType::S64, x.dims()};
  Value flat_index = b.binary(
      "add",
      b.binary(
          "multiply", b.iota(index_type, 2),
          b.broadcast_to(b.constant(static_cast<double>(pool.in[1]), ElementType::S64), x.dims())),
      b.iota(index_type, 3));
  TensorType value{x.element(), {}};
  TensorType index{ElementType::S64, {}};
  // Larger value wins; NaN beats everything (as on the CPU); ties go to the first index.
  std::string region =
      b.region({value, index, value, index}, [&](Builder& r, const std::vector<Value>& a) {
        Value a_nan = r.compare(hlo::Compare::NE, a[0], a[0]);
        Value b_nan = r.compare(hlo::Compare::NE, a[2], a[2]);
        Value greater = r.compare(hlo::Compare::GT, a[0], a[2]);
        Value tie = r.binary("and", r.compare(hlo::Compare::EQ, a[0], a[2]),
                             r.compare(hlo::Compare::LT, a[1], a[3]));
        Value both_nan_first =
            r.binary("and", r.binary("and", a_nan, b_nan), r.compare(hlo::Compare::LT, a[1], a[3]));
        Value take_a = r.binary(
            "or", r.binary("and", a_nan, r.unary("not", b_nan)),
            r.binary("or", both_nan_first,
                     r.binary("and", r.unary("not", b_nan), r.binary("or", greater, tie))));
        return std::vector<Value>{r.select(take_a, a[0], a[2]), r.select(take_a, a[1], a[3])};
      });
  Value lowest = b.constant(-std::numeric_limits<double>::infinity(), x.element());
  if (!hlo::is_float(x.element())) {
    lowest = b.constant(static_cast<double>(std::numeric_limits<int64_t>::min()), x.element());
  }
  std::vector<Value> result = window(b, {x, flat_index}, {lowest, b.constant(-1, ElementType::S64)},
                                     pool, dims_4d(shape), region, /*dilate=*/true);
  program.write(out, b.reshape(result[0], shape));
  program.write(indices, b.reshape(result[1], shape));
  program.run();
  return {out, indices};
}

at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                                            c10::IntArrayRef padding, c10::IntArrayRef dilation,
                                            bool ceil_mode, const at::Tensor& indices) {
  at::Tensor grad_input = empty_as_input(self.sizes(), self, self.scalar_type());
  if (grad_input.numel() == 0) return grad_input;
  const int64_t plane = self.size(-1) * self.size(-2);
  const int64_t planes = self.numel() / std::max<int64_t>(plane, 1);
  const int64_t per_plane = grad_output.size(-1) * grad_output.size(-2);
  c10::ScalarType accumulate = opmath_type(self.scalar_type());
  Program program("aten::max_pool2d_with_indices_backward");
  Builder& b = program.b();
  Value g = b.reshape(program.read(grad_output, accumulate), {planes * per_plane});
  Value idx = b.reshape(program.read(indices, c10::kLong), {planes, per_plane});
  Value base = b.binary("multiply", b.iota(TensorType{ElementType::S64, {planes, per_plane}}, 0),
                        b.broadcast_to(b.constant(static_cast<double>(plane), ElementType::S64),
                                       {planes, per_plane}));
  Value flat = b.reshape(b.binary("add", idx, base), {planes * per_plane, 1});
  Value zeros = b.broadcast_to(b.constant(0, element_type(accumulate)), {planes * plane});
  TensorType scalar{element_type(accumulate), {}};
  std::string add = b.region({scalar, scalar}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.binary("add", a[0], a[1])};
  });
  Value summed = b.op("scatter", {zeros, flat, g}, zeros.type,
                      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
                      "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
                      "indices_are_sorted = false, unique_indices = false",
                      add);
  program.write(grad_input, b.reshape(summed, self.sizes().vec()));
  program.run();
  return grad_input;
}

namespace {

// Per-output-position divisors of avg_pool2d, as PyTorch computes them.
Value avg_divisor(Builder& b, const Pool& p, ElementType type, bool count_include_pad,
                  std::optional<int64_t> divisor_override, const std::vector<int64_t>& dims4) {
  if (divisor_override.has_value()) {
    return b.broadcast_to(b.constant(static_cast<double>(*divisor_override), type), dims4);
  }
  // Sum a window of ones: over the input only, or over input plus its explicit padding.
  Value ones = b.broadcast_to(b.constant(1, type), {1, 1, p.in[0], p.in[1]});
  Pool counting = p;
  if (count_include_pad) {
    ones = b.pad(ones, b.constant(1, type), {0, 0, p.padding[0], p.padding[1]},
                 {0, 0, p.padding[0], p.padding[1]}, {0, 0, 0, 0});
    counting.padding[0] = counting.padding[1] = 0;
    counting.pad_high[0] = std::max<int64_t>(p.pad_high[0] - p.padding[0], 0);
    counting.pad_high[1] = std::max<int64_t>(p.pad_high[1] - p.padding[1], 0);
  }
  TensorType scalar{type, {}};
  std::string add = b.region({scalar, scalar}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.binary("add", a[0], a[1])};
  });
  Value counts =
      window(b, {ones}, {b.constant(0, type)}, counting, {1, 1, p.out[0], p.out[1]}, add, false)[0];
  return b.broadcast_in_dim(b.reshape(counts, {p.out[0], p.out[1]}), dims4, {2, 3});
}

}  // namespace

at::Tensor avg_pool2d(const at::Tensor& self, c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  TORCH_CHECK(!divisor_override.has_value() || *divisor_override != 0, "divisor must be not zero");
  Pool pool = make_pool(self, kernel_size, stride, padding, {}, ceil_mode, "avg_pool2d", false);
  std::vector<int64_t> shape = out_shape(self, pool);
  at::Tensor out = empty_as_input(shape, self, self.scalar_type());
  if (out.numel() == 0) return out;
  c10::ScalarType accumulate = opmath_type(self.scalar_type());
  ElementType type = element_type(accumulate);
  Program program("aten::avg_pool2d");
  Builder& b = program.b();
  Value x = as_4d(b, program.read(self, accumulate));
  TensorType scalar{type, {}};
  std::string add = b.region({scalar, scalar}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.binary("add", a[0], a[1])};
  });
  std::vector<int64_t> dims4 = dims_4d(shape);
  Value sums = window(b, {x}, {b.constant(0, type)}, pool, dims4, add, false)[0];
  Value divisor = avg_divisor(b, pool, type, count_include_pad, divisor_override, dims4);
  program.write(out, b.reshape(b.binary("divide", sums, divisor), shape));
  program.run();
  return out;
}

at::Tensor avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               c10::IntArrayRef kernel_size, c10::IntArrayRef stride,
                               c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                               std::optional<int64_t> divisor_override) {
  Pool pool = make_pool(self, kernel_size, stride, padding, {}, ceil_mode, "avg_pool2d", false);
  at::Tensor grad_input = empty_as_input(self.sizes(), self, self.scalar_type());
  if (grad_input.numel() == 0) return grad_input;
  c10::ScalarType accumulate = opmath_type(self.scalar_type());
  ElementType type = element_type(accumulate);
  Program program("aten::avg_pool2d_backward");
  Builder& b = program.b();
  Value g = as_4d(b, program.read(grad_output, accumulate));
  Value scaled = b.binary(
      "divide", g, avg_divisor(b, pool, type, count_include_pad, divisor_override, g.dims()));
  // Each input element sums the scaled gradients of the windows covering it: spread
  // the gradients stride apart, pad by kernel - 1 - padding, and sum kernel-sized windows.
  std::vector<int64_t> low{0, 0}, high{0, 0};
  Pool spread = pool;
  for (int i = 0; i < 2; ++i) {
    low.push_back(pool.kernel[i] - 1 - pool.padding[i]);
    high.push_back(pool.in[i] + pool.padding[i] - (pool.out[i] - 1) * pool.stride[i] - 1);
    spread.stride[i] = 1;
    spread.padding[i] = 0;
    spread.pad_high[i] = 0;
    spread.out[i] = pool.in[i];
  }
  Value dilated =
      b.pad(scaled, b.constant(0, type), low, high, {0, 0, pool.stride[0] - 1, pool.stride[1] - 1});
  TensorType scalar{type, {}};
  std::string add = b.region({scalar, scalar}, [&](Builder& r, const std::vector<Value>& a) {
    return std::vector<Value>{r.binary("add", a[0], a[1])};
  });
  std::vector<int64_t> dims4 = dims_4d(self.sizes().vec());
  Value summed = window(b, {dilated}, {b.constant(0, type)}, spread, dims4, add, false)[0];
  program.write(grad_input, b.reshape(summed, self.sizes().vec()));
  program.run();
  return grad_input;
}

}  // namespace tpu::aten
