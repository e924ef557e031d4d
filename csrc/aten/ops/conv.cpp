// Convolutions, N-d, through convolution_overrideable (the entry PyTorch keeps for
// out-of-tree backends): forward and backward, strided, padded, dilated, grouped
// and transposed. Every case is one stablehlo.convolution:
//   transposed forward / regular grad_input: convolve the stride-dilated input with
//     the spatially reversed kernel, its in/out channels exchanged per group;
//   grad_weight: convolve input with grad_output, batch taking the place of channels.
#include <ATen/ops/empty.h>

#include <string>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"
#include "host_kernels/convolution.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::TensorType;
using hlo::Value;

struct Window {
  std::vector<int64_t> strides, lhs_dilation, rhs_dilation, pad_low, pad_high;
  int64_t feature_groups = 1;
  int64_t batch_groups = 1;
};

std::string spatial(int64_t n) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) out += ", " + std::to_string(i);
  return out;
}

// `layout` names lhs, rhs and output dimensions, e.g. "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]".
Value convolve(Builder& b, const Value& lhs, const Value& rhs, const std::string& layout,
               const Window& w, const std::vector<int64_t>& result_dims) {
  std::string padding = "dense<[";
  for (size_t i = 0; i < w.pad_low.size(); ++i) {
    padding += (i ? ", [" : "[") + std::to_string(w.pad_low[i]) + ", " +
               std::to_string(w.pad_high[i]) + "]";
  }
  padding += "]> : tensor<" + std::to_string(w.pad_low.size()) + "x2xi64>";
  std::string attributes =
      "batch_group_count = " + std::to_string(w.batch_groups) +
      " : i64, dimension_numbers = #stablehlo.conv<" + layout +
      ">, feature_group_count = " + std::to_string(w.feature_groups) +
      " : i64, lhs_dilation = " + hlo::i64_array(w.lhs_dilation) + ", padding = " + padding +
      ", rhs_dilation = " + hlo::i64_array(w.rhs_dilation) +
      ", window_strides = " + hlo::i64_array(w.strides) + b.precision_config(lhs, rhs);
  return b.op("convolution", {lhs, rhs}, TensorType{lhs.element(), result_dims}, attributes);
}

std::string forward_layout(int64_t n) {
  std::string s = spatial(n);
  return "[b, f" + s + "]x[o, i" + s + "]->[b, f" + s + "]";
}

// A transposed-convolution weight [in, out/g, k...] as the reversed regular kernel
// [out, in/g, k...] that computes the same map.
Value regular_kernel_of_transposed(Builder& b, const Value& weight, int64_t groups) {
  const std::vector<int64_t>& d = weight.dims();
  int64_t in_per_group = d[0] / groups, out_per_group = d[1];
  std::vector<int64_t> split{groups, in_per_group, out_per_group};
  split.insert(split.end(), d.begin() + 2, d.end());
  std::vector<int64_t> permutation{0, 2, 1};
  std::vector<int64_t> reversed;
  for (size_t i = 2; i < d.size(); ++i) {
    permutation.push_back(static_cast<int64_t>(i) + 1);
    reversed.push_back(static_cast<int64_t>(i));
  }
  std::vector<int64_t> merged{groups * out_per_group, in_per_group};
  merged.insert(merged.end(), d.begin() + 2, d.end());
  Value kernel = b.reshape(b.transpose(b.reshape(weight, split), permutation), merged);
  return b.op("reverse", {kernel}, kernel.type, "dimensions = " + hlo::i64_array(reversed));
}

struct Params {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  int64_t groups;
};

// The map y = conv_transpose(x, weight) for a weight laid out [in, out/g, k...].
Value transposed_forward(Builder& b, const Value& x, const Value& weight, const Params& p,
                         const std::vector<int64_t>& result_dims) {
  const int64_t n = x.rank() - 2;
  Window w;
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = weight.dims()[2 + i];
    w.strides.push_back(1);
    w.lhs_dilation.push_back(p.stride[i]);
    w.rhs_dilation.push_back(p.dilation[i]);
    w.pad_low.push_back(p.dilation[i] * (k - 1) - p.padding[i]);
    w.pad_high.push_back(p.dilation[i] * (k - 1) - p.padding[i] + p.output_padding[i]);
  }
  w.feature_groups = p.groups;
  return convolve(b, x, regular_kernel_of_transposed(b, weight, p.groups), forward_layout(n), w,
                  result_dims);
}

Value regular_forward(Builder& b, const Value& x, const Value& weight, const Params& p,
                      const std::vector<int64_t>& result_dims) {
  const int64_t n = x.rank() - 2;
  Window w;
  w.strides = p.stride;
  w.rhs_dilation = p.dilation;
  w.lhs_dilation.assign(n, 1);
  w.pad_low = p.padding;
  w.pad_high = p.padding;
  w.feature_groups = p.groups;
  return convolve(b, x, weight, forward_layout(n), w, result_dims);
}

// d(loss)/d(weight) of y = conv(x, weight) given dy; weight dims `kernel_dims`.
Value regular_weight_grad(Builder& b, const Value& x, const Value& dy, const Params& p,
                          const std::vector<int64_t>& kernel_dims) {
  const int64_t n = x.rank() - 2;
  Window w;
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = kernel_dims[2 + i], in = x.dims()[2 + i], out = dy.dims()[2 + i];
    w.strides.push_back(p.dilation[i]);
    w.rhs_dilation.push_back(p.stride[i]);
    w.lhs_dilation.push_back(1);
    w.pad_low.push_back(p.padding[i]);
    w.pad_high.push_back((k - 1) * p.dilation[i] + (out - 1) * p.stride[i] + 1 - in - p.padding[i]);
  }
  w.batch_groups = p.groups;
  std::string s = spatial(n);
  return convolve(b, x, dy, "[f, b" + s + "]x[i, o" + s + "]->[f, b" + s + "]", w, kernel_dims);
}

std::vector<int64_t> output_dims(const at::Tensor& input, const at::Tensor& weight, const Params& p,
                                 bool transposed) {
  std::vector<int64_t> dims{input.size(0), transposed ? weight.size(1) * p.groups : weight.size(0)};
  for (int64_t i = 0; i < input.dim() - 2; ++i) {
    int64_t in = input.size(2 + i), k = weight.size(2 + i);
    dims.push_back(transposed
                       ? (in - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (k - 1) +
                             p.output_padding[i] + 1
                       : (in + 2 * p.padding[i] - p.dilation[i] * (k - 1) - 1) / p.stride[i] + 1);
  }
  return dims;
}

Params params(c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
              c10::IntArrayRef output_padding, int64_t groups, int64_t spatial_dims) {
  auto expand = [&](c10::IntArrayRef v, int64_t fill) {
    std::vector<int64_t> out(v.begin(), v.end());
    if (out.size() == 1) out.assign(spatial_dims, out[0]);
    if (out.empty()) out.assign(spatial_dims, fill);
    return out;
  };
  return Params{expand(stride, 1), expand(padding, 0), expand(dilation, 1),
                expand(output_padding, 0), groups};
}

// On the CPU platform, float32 convolutions run PyTorch's CPU convolution as a custom call
// (host_kernels/convolution.h), several times faster than XLA:CPU's for a CNN's layers.
bool on_host(std::initializer_list<const at::Tensor*> tensors, c10::IntArrayRef out_sizes) {
  if (!host_kernels::host_convolution_enabled()) return false;
  for (const at::Tensor* t : tensors) {
    if (t != nullptr && (t->scalar_type() != c10::kFloat || t->numel() == 0)) return false;
  }
  const int64_t rank = (*tensors.begin())->dim();
  return rank >= 3 && rank <= 5 && c10::multiply_integers(out_sizes) > 0;
}

host_kernels::ConvolutionSettings host_settings(const Params& p, bool transposed) {
  return {p.stride, p.padding, p.dilation, p.output_padding, p.groups, transposed};
}

}  // namespace

at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight,
                       const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                       c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                       c10::IntArrayRef output_padding, int64_t groups) {
  TORCH_CHECK(input.dim() >= 3, "expected a batched input of at least 3 dimensions, got ",
              input.sizes());
  Params p = params(stride, padding, dilation, output_padding, groups, input.dim() - 2);
  std::vector<int64_t> dims = output_dims(input, weight, p, transposed);
  at::Tensor out = at::empty(dims, input.options());
  Program program("aten::convolution_overrideable");
  Builder& b = program.b();
  const bool has_bias = bias.has_value() && bias->defined();
  if (on_host({&input, &weight, has_bias ? &*bias : nullptr}, dims)) {
    std::vector<Value> operands{program.read(input), program.read(weight)};
    if (has_bias) operands.push_back(program.read(*bias));
    operands.push_back(b.constant_i64(host_settings(p, transposed).encode()));
    program.write(out, b.host_call(host_kernels::host_convolution_target(false), operands,
                                   {TensorType{hlo::ElementType::F32, dims}})[0]);
    program.run();
    return out;
  }
  Value x = program.read(input);
  Value w = program.read(weight, input.scalar_type());
  Value y = transposed ? transposed_forward(b, x, w, p, dims) : regular_forward(b, x, w, p, dims);
  if (bias.has_value() && bias->defined()) {
    y = b.binary("add", y, b.broadcast_in_dim(program.read(*bias, input.scalar_type()), dims, {1}));
  }
  program.write(out, y);
  program.run();
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight,
    c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
    c10::IntArrayRef output_padding, int64_t groups, std::array<bool, 3> output_mask) {
  Params p = params(stride, padding, dilation, output_padding, groups, input.dim() - 2);
  at::Tensor grad_input, grad_weight, grad_bias;
  Program program("aten::convolution_backward_overrideable");
  Builder& b = program.b();
  if (on_host({&input, &weight, &grad_output}, grad_output.sizes()) &&
      (output_mask[0] || output_mask[1] || output_mask[2])) {
    host_kernels::ConvolutionSettings s = host_settings(p, transposed);
    s.grad_input = output_mask[0];
    s.grad_weight = output_mask[1];
    s.grad_bias = output_mask[2];
    std::vector<TensorType> types;
    std::vector<at::Tensor*> results;
    const hlo::ElementType f32 = hlo::ElementType::F32;
    if (s.grad_input) {
      grad_input = at::empty(input.sizes(), input.options());
      types.push_back({f32, input.sizes().vec()});
      results.push_back(&grad_input);
    }
    if (s.grad_weight) {
      grad_weight = at::empty(weight.sizes(), weight.options());
      types.push_back({f32, weight.sizes().vec()});
      results.push_back(&grad_weight);
    }
    if (s.grad_bias) {
      grad_bias = at::empty({grad_output.size(1)}, grad_output.options());
      types.push_back({f32, {grad_output.size(1)}});
      results.push_back(&grad_bias);
    }
    std::vector<Value> r = b.host_call(host_kernels::host_convolution_target(true),
                                       {program.read(grad_output), program.read(input),
                                        program.read(weight), b.constant_i64(s.encode())},
                                       types);
    for (size_t i = 0; i < results.size(); ++i) program.write(*results[i], r[i]);
    program.run();
    return {grad_input, grad_weight, grad_bias};
  }
  Value dy = program.read(grad_output, input.scalar_type());
  if (output_mask[0]) {
    grad_input = at::empty(input.sizes(), input.options());
    Value w = program.read(weight, input.scalar_type());
    std::vector<int64_t> dims = input.sizes().vec();
    Value dx;
    if (transposed) {
      dx = regular_forward(b, dy, w, p, dims);
    } else {
      Params back = p;  // the transposed map, with the leftover rows as output padding
      for (int64_t i = 0; i < input.dim() - 2; ++i) {
        int64_t k = weight.size(2 + i);
        back.output_padding[i] =
            input.size(2 + i) - ((grad_output.size(2 + i) - 1) * p.stride[i] - 2 * p.padding[i] +
                                 p.dilation[i] * (k - 1) + 1);
      }
      dx = transposed_forward(b, dy, w, back, dims);
    }
    program.write(grad_input, dx);
  }
  if (output_mask[1]) {
    grad_weight = at::empty(weight.sizes(), weight.options());
    Value x = program.read(input);
    Value dw = transposed ? regular_weight_grad(b, dy, x, p, weight.sizes().vec())
                          : regular_weight_grad(b, x, dy, p, weight.sizes().vec());
    program.write(grad_weight, dw);
  }
  if (output_mask[2]) {
    grad_bias = at::empty({grad_output.size(1)}, grad_output.options());
    std::vector<int64_t> reduced{0};
    for (int64_t i = 2; i < grad_output.dim(); ++i) reduced.push_back(i);
    c10::ScalarType accumulate = opmath_type(grad_output.scalar_type());
    Value g = program.read(grad_output, accumulate);
    program.write(grad_bias, b.reduce(g, b.constant(0, element_type(accumulate)),
                                      hlo::Reduction::Add, reduced));
  }
  program.run();
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace tpu::aten
