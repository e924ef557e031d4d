// Batch normalization (native_batch_norm and its backward): the input is viewed as [N, C, L]
// and statistics are taken per channel over axes 0 and 2. Training updates the running
// statistics in place, in the same program, with the unbiased variance as the CPU does.
#include "host_kernels/batch_norm.h"

#include <ATen/ops/empty.h>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Value;

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }
Value mul(Builder& b, const Value& x, const Value& y) { return b.binary("multiply", x, y); }
Value sub(Builder& b, const Value& x, const Value& y) { return b.binary("subtract", x, y); }
Value sum02(Builder& b, const Value& x) {
  return b.reduce(x, b.constant(0, x.element()), hlo::Reduction::Add, {0, 2});
}
Value splat(Builder& b, double v, const std::vector<int64_t>& dims, hlo::ElementType e) {
  return b.broadcast_to(b.constant(v, e), dims);
}

std::vector<int64_t> ncl(const at::Tensor& input) {
  int64_t l = 1;
  for (int64_t d = 2; d < input.dim(); ++d) l *= input.size(d);
  return {input.size(0), input.size(1), l};
}

// A per-channel [C] parameter, broadcast over [N, C, L].
Value channel(Builder& b, const Value& v, const std::vector<int64_t>& shape) {
  return b.broadcast_in_dim(v, shape, {1});
}

// On the CPU platform, float32 training-mode batch norm runs PyTorch's CPU kernels as custom
// calls (host_kernels/batch_norm.h). Evaluation mode, an elementwise map, keeps XLA's program.
bool on_host(const at::Tensor& input,
             std::initializer_list<const std::optional<at::Tensor>*> others) {
  if (!host_kernels::host_batch_norm_enabled() || input.scalar_type() != c10::kFloat ||
      input.numel() == 0) {
    return false;
  }
  for (const auto* t : others) {
    if (defined(*t) && (*t)->scalar_type() != c10::kFloat) return false;
  }
  return true;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
    const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dimensions, got ",
              input.dim());
  const int64_t C = input.size(1);
  for (const auto* t : {&weight, &bias, &running_mean, &running_var}) {
    TORCH_CHECK(!defined(*t) || (*t)->numel() == C, "batch_norm: expected a tensor of ", C,
                " elements (one per channel), got ", (*t)->numel());
  }
  TORCH_CHECK(training || (defined(running_mean) && defined(running_var)),
              "running_mean and running_var must be defined in evaluation mode");
  std::vector<int64_t> shape = ncl(input);
  const int64_t count = shape[0] * shape[2];
  const c10::ScalarType compute = opmath_type(input.scalar_type());
  const c10::ScalarType stats =
      defined(weight) && weight->scalar_type() == c10::kFloat ? compute : input.scalar_type();
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor save_mean = at::empty({training ? C : 0}, input.options().dtype(stats));
  at::Tensor save_invstd = at::empty({training ? C : 0}, input.options().dtype(stats));
  if (input.numel() == 0 && !training) return {out, save_mean, save_invstd};
  const hlo::ElementType e = element_type(compute);
  Program p("aten::native_batch_norm");
  auto& b = p.b();
  Value x = b.reshape(p.read(input, compute), shape);
  const bool running = defined(running_mean) && defined(running_var);
  if (training && (running || (!defined(running_mean) && !defined(running_var))) &&
      on_host(input, {&weight, &bias, &running_mean, &running_var})) {
    std::vector<Value> operands{x};
    for (const auto* t : {&weight, &bias}) {
      if (defined(*t)) operands.push_back(b.reshape(p.read(**t), {C}));
    }
    if (running) {
      operands.push_back(b.reshape(p.read(*running_mean), {C}));
      operands.push_back(b.reshape(p.read(*running_var), {C}));
    }
    operands.push_back(b.constant_i64({defined(weight), defined(bias), running}));
    operands.push_back(p.scalar(momentum, c10::kDouble));
    operands.push_back(p.scalar(eps, c10::kDouble));
    const hlo::ElementType f32 = hlo::ElementType::F32;
    std::vector<hlo::TensorType> types{{f32, shape}, {f32, {C}}, {f32, {C}}};
    if (running) types.insert(types.end(), {{f32, {C}}, {f32, {C}}});
    std::vector<Value> r =
        b.host_call(host_kernels::host_batch_norm_target(false), operands, types);
    p.write(out, b.reshape(r[0], input.sizes().vec()));
    p.write(save_mean, r[1]);
    p.write(save_invstd, r[2]);
    if (running) {
      p.write(*running_mean, b.reshape(r[3], running_mean->sizes().vec()));
      p.write(*running_var, b.reshape(r[4], running_var->sizes().vec()));
    }
    p.run();
    return {out, save_mean, save_invstd};
  }
  Value eps_c = b.broadcast_to(p.scalar(eps, compute), {C});
  Value mean, invstd;
  if (training) {
    mean = mul(b, sum02(b, x), splat(b, 1.0 / count, {C}, e));
    Value xc = sub(b, x, channel(b, mean, shape));
    Value var = mul(b, sum02(b, mul(b, xc, xc)), splat(b, 1.0 / count, {C}, e));
    invstd = b.unary("rsqrt", b.binary("add", var, eps_c));
    p.write(save_mean, mean);
    p.write(save_invstd, invstd);
    Value m = b.broadcast_to(p.scalar(momentum, compute), {C});
    Value keep = sub(b, splat(b, 1, {C}, e), m);
    if (defined(running_mean)) {
      Value old = b.reshape(p.read(*running_mean, compute), {C});
      p.write(*running_mean, b.binary("add", mul(b, keep, old), mul(b, m, mean)));
    }
    if (defined(running_var)) {
      Value old = b.reshape(p.read(*running_var, compute), {C});
      const double unbias = count > 1 ? static_cast<double>(count) / (count - 1) : 1.0 / 0.0;
      Value unbiased = mul(b, var, splat(b, unbias, {C}, e));
      p.write(*running_var, b.binary("add", mul(b, keep, old), mul(b, m, unbiased)));
    }
  } else {
    mean = b.reshape(p.read(*running_mean, compute), {C});
    invstd =
        b.unary("rsqrt", b.binary("add", b.reshape(p.read(*running_var, compute), {C}), eps_c));
  }
  Value y = mul(b, sub(b, x, channel(b, mean, shape)), channel(b, invstd, shape));
  if (defined(weight)) y = mul(b, y, channel(b, b.reshape(p.read(*weight, compute), {C}), shape));
  if (defined(bias)) {
    y = b.binary("add", y, channel(b, b.reshape(p.read(*bias, compute), {C}), shape));
  }
  p.write(out, b.reshape(y, input.sizes().vec()));
  p.run();
  return {out, save_mean, save_invstd};
}

// The forms that AOTAutograd's functionalized graphs (torch.compile) call: the same
// lowering, with the running statistics required or absent.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, at::Tensor& running_mean, at::Tensor& running_var,
    bool training, double momentum, double eps) {
  return native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit_no_stats(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, bool training, double momentum, double eps) {
  return native_batch_norm(input, weight, bias, std::nullopt, std::nullopt, training, momentum,
                           eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd,
    bool train, double eps, std::array<bool, 3> mask) {
  const int64_t C = input.size(1);
  std::vector<int64_t> shape = ncl(input);
  const int64_t count = shape[0] * shape[2];
  at::Tensor grad_input, grad_weight, grad_bias;
  c10::TensorOptions param = defined(weight) ? weight->options() : input.options();
  if (mask[0]) grad_input = at::empty(input.sizes(), input.options());
  if (mask[1]) grad_weight = at::empty({C}, param);
  if (mask[2]) grad_bias = at::empty({C}, param);
  const c10::ScalarType compute = opmath_type(input.scalar_type());
  const hlo::ElementType e = element_type(compute);
  Program p("aten::native_batch_norm_backward");
  auto& b = p.b();
  Value x = b.reshape(p.read(input, compute), shape);
  Value g = b.reshape(p.read(grad_out, compute), shape);
  if (train && (mask[0] || mask[1] || mask[2]) && defined(save_mean) && defined(save_invstd) &&
      grad_out.scalar_type() == c10::kFloat &&
      on_host(input, {&weight, &save_mean, &save_invstd})) {
    std::vector<Value> operands{g, x};
    if (defined(weight)) operands.push_back(b.reshape(p.read(*weight), {C}));
    operands.push_back(b.reshape(p.read(*save_mean), {C}));
    operands.push_back(b.reshape(p.read(*save_invstd), {C}));
    operands.push_back(b.constant_i64({defined(weight), mask[0], mask[1], mask[2]}));
    operands.push_back(p.scalar(eps, c10::kDouble));
    const hlo::ElementType f32 = hlo::ElementType::F32;
    std::vector<hlo::TensorType> types;
    std::vector<at::Tensor*> results;
    if (mask[0]) {
      types.push_back({f32, shape});
      results.push_back(&grad_input);
    }
    for (at::Tensor* t : {&grad_weight, &grad_bias}) {
      if (t->defined()) {
        types.push_back({f32, {C}});
        results.push_back(t);
      }
    }
    std::vector<Value> r = b.host_call(host_kernels::host_batch_norm_target(true), operands, types);
    for (size_t i = 0; i < results.size(); ++i) {
      p.write(*results[i], b.reshape(r[i], results[i]->sizes().vec()));
    }
    p.run();
    return {grad_input, grad_weight, grad_bias};
  }
  Value mean, invstd;
  if (train && save_mean->scalar_type() != compute) {
    // Statistics saved in bfloat16/float16 (an input without float parameters) are
    // recomputed in float32, as the CPU's backward effectively has them: centring with the
    // rounded mean leaves sum(x - mean) far from 0, and a gradient that should vanish does not.
    const Value inv_n = splat(b, 1.0 / count, {C}, e);
    mean = mul(b, sum02(b, x), inv_n);
    Value centered = sub(b, x, channel(b, mean, shape));
    Value var = mul(b, sum02(b, mul(b, centered, centered)), inv_n);
    invstd = b.unary("rsqrt", b.binary("add", var, b.broadcast_to(p.scalar(eps, compute), {C})));
  } else if (train) {
    mean = b.reshape(p.read(*save_mean, compute), {C});
    invstd = b.reshape(p.read(*save_invstd, compute), {C});
  } else {
    mean = b.reshape(p.read(*running_mean, compute), {C});
    invstd = b.unary("rsqrt", b.binary("add", b.reshape(p.read(*running_var, compute), {C}),
                                       b.broadcast_to(p.scalar(eps, compute), {C})));
  }
  Value xhat = mul(b, sub(b, x, channel(b, mean, shape)), channel(b, invstd, shape));
  Value sum_g = sum02(b, g);
  Value sum_g_xhat = sum02(b, mul(b, g, xhat));
  if (grad_input.defined()) {
    Value w = defined(weight) ? b.reshape(p.read(*weight, compute), {C}) : splat(b, 1, {C}, e);
    Value scale = channel(b, mul(b, w, invstd), shape);
    Value gi;
    if (train) {
      const Value inv_n = splat(b, 1.0 / count, shape, e);
      Value centered = sub(b, sub(b, g, mul(b, channel(b, sum_g, shape), inv_n)),
                           mul(b, xhat, mul(b, channel(b, sum_g_xhat, shape), inv_n)));
      gi = mul(b, centered, scale);
    } else {
      gi = mul(b, g, scale);
    }
    p.write(grad_input, b.reshape(gi, input.sizes().vec()));
  }
  if (grad_weight.defined()) p.write(grad_weight, sum_g_xhat);
  if (grad_bias.defined()) p.write(grad_bias, sum_g);
  p.run();
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace tpu::aten
