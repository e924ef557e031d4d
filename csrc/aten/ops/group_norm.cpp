// Group normalization (native_group_norm and its backward): the input is viewed as
// [N, group, D, HxW] with D = C / group channels per group, and statistics are taken per
// (sample, group) over axes 2 and 3. The per-channel weight and bias are [group, D].
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
Value splat(Builder& b, double v, const std::vector<int64_t>& dims, hlo::ElementType e) {
  return b.broadcast_to(b.constant(v, e), dims);
}

struct Shape {
  std::vector<int64_t> grouped;   // [N, group, D, HxW]
  std::vector<int64_t> stats;     // [N, group]
  std::vector<int64_t> channels;  // [group, D]
  int64_t count = 0;              // elements per (sample, group)
};

Shape shape_of(int64_t N, int64_t C, int64_t HxW, int64_t group) {
  const int64_t D = C / group;
  return {{N, group, D, HxW}, {N, group}, {group, D}, D * HxW};
}

void check_sizes(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                 const std::optional<at::Tensor>& bias, int64_t N, int64_t C, int64_t HxW,
                 int64_t group) {
  TORCH_CHECK(group > 0 && C % group == 0,
              "Expected number of channels in input to be divisible by num_groups, but got "
              "input of shape ",
              input.sizes(), " and num_groups=", group);
  TORCH_CHECK(input.numel() == N * C * HxW, "Expected the input to have ", N * C * HxW,
              " elements (N * C * HxW), but got ", input.numel());
  for (const auto* t : {&weight, &bias}) {
    TORCH_CHECK(!defined(*t) || (*t)->numel() == C, "Expected weight and bias to have ", C,
                " elements (one per channel), but got a tensor of shape ", (*t)->sizes());
  }
}

// mean and rstd of [N, group] broadcast over [N, group, D, HxW].
Value per_group(Builder& b, const Value& v, const Shape& s) {
  return b.broadcast_in_dim(v, s.grouped, {0, 1});
}
// A [C] parameter broadcast over [N, group, D, HxW].
Value per_channel(Program& p, const at::Tensor& t, const Shape& s, c10::ScalarType compute) {
  return p.b().broadcast_in_dim(p.b().reshape(p.read(t, compute), s.channels), s.grouped, {1, 2});
}
Value sum23(Builder& b, const Value& x) {
  return b.reduce(x, b.constant(0, x.element()), hlo::Reduction::Add, {2, 3});
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(
    const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& bias, int64_t N, int64_t C, int64_t HxW, int64_t group,
    double eps) {
  check_sizes(input, weight, bias, N, C, HxW, group);
  const c10::ScalarType compute = opmath_type(input.scalar_type());
  // A reduced-precision input with float parameters keeps float statistics, as the CPU does.
  const bool mixed =
      compute != input.scalar_type() && ((defined(weight) && weight->scalar_type() == compute) ||
                                         (defined(bias) && bias->scalar_type() == compute));
  const c10::ScalarType stats = mixed ? compute : input.scalar_type();
  const Shape s = shape_of(N, C, HxW, group);
  at::Tensor out = at::empty(input.sizes(), input.options());
  at::Tensor mean = at::empty(s.stats, input.options().dtype(stats));
  at::Tensor rstd = at::empty(s.stats, input.options().dtype(stats));
  if (N * group == 0) return {out, mean, rstd};
  const hlo::ElementType e = element_type(compute);
  Program p("aten::native_group_norm");
  auto& b = p.b();
  Value x = b.reshape(p.read(input, compute), s.grouped);
  const Value inv_count = splat(b, 1.0 / static_cast<double>(s.count), s.stats, e);
  Value m = mul(b, sum23(b, x), inv_count);
  Value xc = sub(b, x, per_group(b, m, s));
  Value var = mul(b, sum23(b, mul(b, xc, xc)), inv_count);
  Value r = b.unary("rsqrt", b.binary("add", var, b.broadcast_to(p.scalar(eps, compute), s.stats)));
  Value y = mul(b, xc, per_group(b, r, s));
  if (defined(weight)) y = mul(b, y, per_channel(p, *weight, s, compute));
  if (defined(bias)) y = b.binary("add", y, per_channel(p, *bias, s, compute));
  p.write(out, b.reshape(y, input.sizes().vec()));
  p.write(mean, m);
  p.write(rstd, r);
  p.run();
  return {out, mean, rstd};
}

// With xhat = (x - mean) * rstd and dxhat = dy * weight, per (sample, group):
//   dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),
//   dweight = sum over N, HxW of dy * xhat, dbias = sum over N, HxW of dy.
std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight, int64_t N, int64_t C,
    int64_t HxW, int64_t group, std::array<bool, 3> mask) {
  check_sizes(input, weight, std::nullopt, N, C, HxW, group);
  TORCH_CHECK(grad_out.numel() == input.numel(), "Expected grad_out to have ", input.numel(),
              " elements, but got ", grad_out.numel());
  const Shape s = shape_of(N, C, HxW, group);
  c10::TensorOptions param = defined(weight) ? weight->options() : input.options();
  at::Tensor grad_input, grad_weight, grad_bias;
  if (mask[0]) grad_input = at::empty(input.sizes(), input.options());
  if (mask[1]) grad_weight = at::empty({C}, param);
  if (mask[2]) grad_bias = at::empty({C}, param);
  if (input.numel() == 0) {
    // Nothing to differentiate: the parameter gradients are sums over no elements.
    if (grad_weight.defined()) grad_weight.zero_();
    if (grad_bias.defined()) grad_bias.zero_();
    return {grad_input, grad_weight, grad_bias};
  }
  const c10::ScalarType compute = opmath_type(input.scalar_type());
  const hlo::ElementType e = element_type(compute);
  Program p("aten::native_group_norm_backward");
  auto& b = p.b();
  Value x = b.reshape(p.read(input, compute), s.grouped);
  Value g = b.reshape(p.read(grad_out, compute), s.grouped);
  Value r = per_group(b, b.reshape(p.read(rstd, compute), s.stats), s);
  Value xhat = mul(b, sub(b, x, per_group(b, b.reshape(p.read(mean, compute), s.stats), s)), r);
  if (grad_input.defined()) {
    Value dxhat = defined(weight) ? mul(b, g, per_channel(p, *weight, s, compute)) : g;
    const Value inv_count = splat(b, 1.0 / static_cast<double>(s.count), s.stats, e);
    Value mean_dxhat = per_group(b, mul(b, sum23(b, dxhat), inv_count), s);
    Value mean_dxhat_xhat = per_group(b, mul(b, sum23(b, mul(b, dxhat, xhat)), inv_count), s);
    Value dx = mul(b, sub(b, sub(b, dxhat, mean_dxhat), mul(b, xhat, mean_dxhat_xhat)), r);
    p.write(grad_input, b.reshape(dx, input.sizes().vec()));
  }
  auto sum_n_hw = [&](const Value& v) {
    return b.reshape(b.reduce(v, b.constant(0, e), hlo::Reduction::Add, {0, 3}), {C});
  };
  if (grad_weight.defined()) p.write(grad_weight, sum_n_hw(mul(b, g, xhat)));
  if (grad_bias.defined()) p.write(grad_bias, sum_n_hw(g));
  p.run();
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace tpu::aten
