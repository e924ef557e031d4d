// Normalization layers: layer, batch, group, RMS and weight norm, and their backward. Each lowering
// views the input as a small-rank array whose reduced axes hold one normalization group, computes
// in float32 for half inputs, and writes every output from one program.
#include <ATen/native/layer_norm.h>
#include <ATen/ops/empty.h>

#include <limits>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"
#include "host_kernels/layer_norm.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Value;

Value sum(Builder& b, const Value& x, const std::vector<int64_t>& dims) {
  return b.reduce(x, b.constant(0, x.element()), hlo::Reduction::Add, dims);
}
// `v` (with x's dimensions `kept`) broadcast back to x's shape.
Value back(Builder& b, const Value& v, const Value& x, const std::vector<int64_t>& kept) {
  return b.broadcast_in_dim(v, x.dims(), kept);
}
Value mul(Builder& b, const Value& x, const Value& y) { return b.binary("multiply", x, y); }
Value sub(Builder& b, const Value& x, const Value& y) { return b.binary("subtract", x, y); }
Value scalar(Builder& b, double v, const Value& like) {
  return b.broadcast_to(b.constant(v, like.element()), like.dims());
}

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }
// An optional argument as a PreparedCall slot (null when absent).
const at::Tensor* optional_tensor(const std::optional<at::Tensor>& t) {
  return defined(t) ? &*t : nullptr;
}

// Statistics dtype: float32 when a half input comes with float parameters (PyTorch's
// "mixed type"), the input dtype otherwise.
c10::ScalarType stats_type(const at::Tensor& input, const std::optional<at::Tensor>& weight) {
  bool mixed = opmath_type(input.scalar_type()) != input.scalar_type() && defined(weight) &&
               weight->scalar_type() == c10::kFloat;
  return mixed ? c10::kFloat : input.scalar_type();
}

// Gradient wrt x of y = (x - mean) * rstd over reduced dims `reduced` (count n), given
// dy (already multiplied by the weight) and xhat:  rstd/n * (n*dy - sum(dy) - xhat*sum(dy*xhat)).
Value normalize_backward(Builder& b, const Value& dy, const Value& xhat, const Value& rstd_full,
                         const std::vector<int64_t>& reduced, const std::vector<int64_t>& kept,
                         double n) {
  Value sum_dy = back(b, sum(b, dy, reduced), dy, kept);
  Value sum_dy_xhat = back(b, sum(b, mul(b, dy, xhat), reduced), dy, kept);
  Value inner = sub(b, sub(b, mul(b, dy, scalar(b, n, dy)), sum_dy), mul(b, xhat, sum_dy_xhat));
  return mul(b, mul(b, rstd_full, scalar(b, 1.0 / n, dy)), inner);
}

// On the CPU platform, float32 layer norm (with weight and bias, weight alone, or neither) runs
// PyTorch's CPU kernel as a custom call (host_kernels/layer_norm.h): one pass instead of XLA's
// separate loops for each row reduction, and the CPU's results to the bit.
bool layer_norm_on_host(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                        const std::optional<at::Tensor>& bias) {
  auto f32 = [](const at::Tensor& t) { return t.scalar_type() == c10::kFloat; };
  return host_kernels::host_layer_norm_enabled() && f32(input) &&
         (!defined(weight) || f32(*weight)) && (!defined(bias) || (defined(weight) && f32(*bias)));
}

}  // namespace

// ---- layer norm: x as [M, N] ----

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(
    const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps) {
  auto [M, N] = at::native::_check_layer_norm_inputs(
      input, normalized_shape, weight.value_or(at::Tensor()), bias.value_or(at::Tensor()));
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor mean = at::empty(stat_shape, input.options().dtype(stats_type(input, weight)));
  at::Tensor rstd = at::empty(stat_shape, mean.options());
  if (input.numel() == 0) return {out, mean, rstd};
  const c10::ScalarType compute = opmath_type(input.scalar_type());
  const c10::Scalar epsilon(eps);  // a run-time operand: one program for every eps
  // M and N follow from the input's sizes and how many of its dimensions are normalized.
  PreparedCall call("aten::native_layer_norm",
                    {&input, optional_tensor(weight), optional_tensor(bias), &out, &mean, &rstd},
                    {&epsilon}, {axis, host_kernels::host_layer_norm_enabled()});
  if (call.run()) return {out, mean, rstd};
  Program p("aten::native_layer_norm", &call);
  auto& b = p.b();
  Value x = b.reshape(p.read(input, compute), {M, N});
  if (layer_norm_on_host(input, weight, bias)) {
    std::vector<Value> operands{x};
    if (defined(weight)) operands.push_back(b.reshape(p.read(*weight, compute), {N}));
    if (defined(bias)) operands.push_back(b.reshape(p.read(*bias, compute), {N}));
    operands.push_back(p.scalar(epsilon, compute));
    const hlo::ElementType f32 = hlo::ElementType::F32;
    std::vector<Value> r = b.host_call(host_kernels::host_layer_norm_target(false), operands,
                                       {{f32, {M, N}}, {f32, {M}}, {f32, {M}}});
    p.write(out, b.reshape(r[0], input.sizes().vec()));
    p.write(mean, b.reshape(r[1], stat_shape));
    p.write(rstd, b.reshape(r[2], stat_shape));
    p.run();
    return {out, mean, rstd};
  }
  Value m = mul(b, sum(b, x, {1}), b.broadcast_to(b.constant(1.0 / N, x.element()), {M}));
  Value xc = sub(b, x, back(b, m, x, {0}));
  Value var =
      mul(b, sum(b, mul(b, xc, xc), {1}), b.broadcast_to(b.constant(1.0 / N, x.element()), {M}));
  Value r = b.unary("rsqrt", b.binary("add", var, b.broadcast_to(p.scalar(epsilon, compute), {M})));
  Value y = mul(b, xc, back(b, r, x, {0}));
  if (defined(weight)) y = mul(b, y, back(b, b.reshape(p.read(*weight, compute), {N}), x, {1}));
  if (defined(bias)) {
    y = b.binary("add", y, back(b, b.reshape(p.read(*bias, compute), {N}), x, {1}));
  }
  p.write(out, b.reshape(y, input.sizes().vec()));
  p.write(mean, b.reshape(m, stat_shape));
  p.write(rstd, b.reshape(r, stat_shape));
  p.run();
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const at::Tensor& mean, const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, std::array<bool, 3> mask) {
  auto [M, N] = at::native::_check_layer_norm_inputs(
      input, normalized_shape, weight.value_or(at::Tensor()), bias.value_or(at::Tensor()));
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) grad_input = at::empty(input.sizes(), input.options());
  if (mask[1] && defined(weight)) grad_weight = at::empty(weight->sizes(), weight->options());
  if (mask[2] && defined(bias)) grad_bias = at::empty(bias->sizes(), bias->options());
  if (input.numel() == 0) {
    if (grad_weight.defined()) grad_weight.zero_();
    if (grad_bias.defined()) grad_bias.zero_();
    return {grad_input, grad_weight, grad_bias};
  }
  const c10::ScalarType compute = opmath_type(input.scalar_type());
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  PreparedCall call("aten::native_layer_norm_backward",
                    {&grad_out, &input, &mean, &rstd, optional_tensor(weight), &grad_input,
                     &grad_weight, &grad_bias},
                    {}, {axis, host_kernels::host_layer_norm_enabled()});
  if (call.run()) return {grad_input, grad_weight, grad_bias};
  Program p("aten::native_layer_norm_backward", &call);
  auto& b = p.b();
  Value x = b.reshape(p.read(input, compute), {M, N});
  Value g = b.reshape(p.read(grad_out, compute), {M, N});
  if (layer_norm_on_host(input, weight, bias) && grad_out.scalar_type() == c10::kFloat &&
      mean.scalar_type() == c10::kFloat && rstd.scalar_type() == c10::kFloat) {
    // The kernel computes every gradient; those not asked for are left unwritten.
    const hlo::ElementType f32 = hlo::ElementType::F32;
    std::vector<Value> operands{g, x, b.reshape(p.read(mean, compute), {M}),
                                b.reshape(p.read(rstd, compute), {M})};
    std::vector<hlo::TensorType> results{{f32, {M, N}}};
    if (defined(weight)) {
      operands.push_back(b.reshape(p.read(*weight, compute), {N}));
      results.push_back({f32, {N}});
      results.push_back({f32, {N}});
    }
    std::vector<Value> r =
        b.host_call(host_kernels::host_layer_norm_target(true), operands, results);
    if (grad_input.defined()) p.write(grad_input, b.reshape(r[0], input.sizes().vec()));
    if (grad_weight.defined()) p.write(grad_weight, b.reshape(r[1], weight->sizes().vec()));
    if (grad_bias.defined()) p.write(grad_bias, b.reshape(r[2], bias->sizes().vec()));
    p.run();
    return {grad_input, grad_weight, grad_bias};
  }
  Value r = back(b, b.reshape(p.read(rstd, compute), {M}), x, {0});
  Value xhat = mul(b, sub(b, x, back(b, b.reshape(p.read(mean, compute), {M}), x, {0})), r);
  if (grad_input.defined()) {
    Value dy =
        defined(weight) ? mul(b, g, back(b, b.reshape(p.read(*weight, compute), {N}), x, {1})) : g;
    Value gi = normalize_backward(b, dy, xhat, r, {1}, {0}, static_cast<double>(N));
    p.write(grad_input, b.reshape(gi, input.sizes().vec()));
  }
  if (grad_weight.defined()) {
    p.write(grad_weight, b.reshape(sum(b, mul(b, g, xhat), {0}), weight->sizes().vec()));
  }
  if (grad_bias.defined()) p.write(grad_bias, b.reshape(sum(b, g, {0}), bias->sizes().vec()));
  p.run();
  return {grad_input, grad_weight, grad_bias};
}

// ---- RMS norm: x as [M, N]; rstd = 1/sqrt(mean(x^2) + eps) ----

std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input,
                                                  c10::IntArrayRef normalized_shape,
                                                  const std::optional<at::Tensor>& weight,
                                                  std::optional<double> eps) {
  auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape,
                                                     weight.value_or(at::Tensor()), at::Tensor());
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  const c10::ScalarType compute = opmath_type(input.scalar_type());
  double epsilon = eps.value_or(0.0);
  if (!eps.has_value()) {
    epsilon = input.scalar_type() == c10::kDouble ? std::numeric_limits<double>::epsilon()
                                                  : std::numeric_limits<float>::epsilon();
    if (input.scalar_type() == c10::kHalf) epsilon = 0.0009765625;
    if (input.scalar_type() == c10::kBFloat16) epsilon = 0.0078125;
  }
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor rstd = at::empty(stat_shape, input.options().dtype(compute));
  if (input.numel() == 0) return {out, rstd};
  Program p("aten::_fused_rms_norm");
  auto& b = p.b();
  Value x = b.reshape(p.read(input, compute), {M, N});
  Value ms =
      mul(b, sum(b, mul(b, x, x), {1}), b.broadcast_to(b.constant(1.0 / N, x.element()), {M}));
  Value r = b.unary("rsqrt", b.binary("add", ms, b.broadcast_to(p.scalar(epsilon, compute), {M})));
  Value y = mul(b, x, back(b, r, x, {0}));
  if (defined(weight)) y = mul(b, y, back(b, b.reshape(p.read(*weight, compute), {N}), x, {1}));
  p.write(out, b.reshape(y, input.sizes().vec()));
  p.write(rstd, b.reshape(r, stat_shape));
  p.run();
  return {out, rstd};
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, std::array<bool, 2> mask) {
  auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape,
                                                     weight.value_or(at::Tensor()), at::Tensor());
  at::Tensor grad_input, grad_weight;
  if (mask[0]) grad_input = at::empty(input.sizes(), input.options());
  if (mask[1] && defined(weight)) grad_weight = at::empty(weight->sizes(), weight->options());
  if (input.numel() == 0) {
    if (grad_weight.defined()) grad_weight.zero_();
    return {grad_input, grad_weight};
  }
  const c10::ScalarType compute = opmath_type(input.scalar_type());
  Program p("aten::_fused_rms_norm_backward");
  auto& b = p.b();
  Value x = b.reshape(p.read(input, compute), {M, N});
  Value g = b.reshape(p.read(grad_out, compute), {M, N});
  Value r = back(b, b.reshape(p.read(rstd, compute), {M}), x, {0});
  Value xhat = mul(b, x, r);
  if (grad_input.defined()) {
    Value dy =
        defined(weight) ? mul(b, g, back(b, b.reshape(p.read(*weight, compute), {N}), x, {1})) : g;
    // d/dx (x * rstd) = rstd * (dy - xhat * mean(dy * xhat))
    Value proj = back(b, sum(b, mul(b, dy, xhat), {1}), x, {0});
    Value gi = mul(b, r, sub(b, dy, mul(b, xhat, mul(b, proj, scalar(b, 1.0 / N, x)))));
    p.write(grad_input, b.reshape(gi, input.sizes().vec()));
  }
  if (grad_weight.defined()) {
    p.write(grad_weight, b.reshape(sum(b, mul(b, g, xhat), {0}), weight->sizes().vec()));
  }
  p.run();
  return {grad_input, grad_weight};
}

// ---- weight norm: w = v * g / ||v||, the norm over every dimension of v but `dim` ----

namespace {

// v as [channels, rest] (dim 0) or [rest, channels] (the last dim): the fused kernel's two cases.
struct WeightNormShape {
  std::vector<int64_t> dims;
  int64_t kept;     // the channel axis of `dims`
  int64_t reduced;  // the other one
};

WeightNormShape weight_norm_shape(const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  TORCH_CHECK(dim == 0 || dim == v.dim() - 1,
              "fused kernels can only be applied for first or last dim");
  const int64_t channels = v.size(dim);
  TORCH_CHECK(g.numel() == channels, "_weight_norm_interface: g has ", g.numel(),
              " elements, expected v.size(", dim, ") = ", channels);
  const int64_t rest = channels == 0 ? 0 : v.numel() / channels;
  if (dim == 0) return {{channels, rest}, 0, 1};
  return {{rest, channels}, 1, 0};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> weight_norm_interface(const at::Tensor& v, const at::Tensor& g,
                                                         int64_t dim) {
  WeightNormShape shape = weight_norm_shape(v, g, dim);
  at::Tensor w = at::empty(v.sizes(), v.options());
  // the norm stays in float32 for half-precision weights, as on the CPU
  at::Tensor norm = at::empty(g.sizes(), g.options().dtype(opmath_type(g.scalar_type())));
  if (v.numel() == 0) return {w, norm};
  const c10::ScalarType compute = opmath_type(v.scalar_type());
  Program p("aten::_weight_norm_interface");
  auto& b = p.b();
  Value x = b.reshape(p.read(v, compute), shape.dims);
  Value gain = b.reshape(p.read(g, compute), {x.dims()[shape.kept]});
  Value n = b.unary("sqrt", sum(b, mul(b, x, x), {shape.reduced}));
  Value y = mul(b, x, back(b, b.binary("divide", gain, n), x, {shape.kept}));
  p.write(w, b.reshape(y, v.sizes().vec()));
  p.write(norm, b.reshape(n, g.sizes().vec()));
  p.run();
  return {w, norm};
}

// grad_g = sum(grad_w * v) / norm;  grad_v = (g / norm) * (grad_w - v * grad_g / norm)
std::tuple<at::Tensor, at::Tensor> weight_norm_interface_backward(const at::Tensor& grad_w,
                                                                  const at::Tensor& saved_v,
                                                                  const at::Tensor& saved_g,
                                                                  const at::Tensor& saved_norms,
                                                                  int64_t dim) {
  WeightNormShape shape = weight_norm_shape(saved_v, saved_g, dim);
  at::Tensor grad_v = at::empty(saved_v.sizes(), saved_v.options());
  at::Tensor grad_g = at::empty(saved_g.sizes(), saved_g.options());
  if (saved_v.numel() == 0) return {grad_v, grad_g};
  const c10::ScalarType compute = opmath_type(saved_v.scalar_type());
  Program p("aten::_weight_norm_interface_backward");
  auto& b = p.b();
  Value x = b.reshape(p.read(saved_v, compute), shape.dims);
  Value dy = b.reshape(p.read(grad_w, compute), shape.dims);
  const int64_t channels = x.dims()[shape.kept];
  Value gain = b.reshape(p.read(saved_g, compute), {channels});
  Value n = b.reshape(p.read(saved_norms, compute), {channels});
  Value per_channel = sum(b, mul(b, dy, x), {shape.reduced});
  Value scale = b.binary("divide", gain, n);
  Value correction = b.binary("divide", mul(b, scale, per_channel), mul(b, n, n));
  Value dv = sub(b, mul(b, dy, back(b, scale, x, {shape.kept})),
                 mul(b, x, back(b, correction, x, {shape.kept})));
  p.write(grad_v, b.reshape(dv, saved_v.sizes().vec()));
  p.write(grad_g, b.reshape(b.binary("divide", per_channel, n), saved_g.sizes().vec()));
  p.run();
  return {grad_v, grad_g};
}

}  // namespace tpu::aten
