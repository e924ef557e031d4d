// Elementwise losses beyond mse: binary_cross_entropy, binary_cross_entropy_with_logits,
// log_sigmoid (F.logsigmoid), smooth_l1_loss and huber_loss, forward and backward. Values are
// computed in opmath and rounded once.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"
#include "hlo/log1p.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::Value;

bool defined(const std::optional<at::Tensor>& t) { return t.has_value() && t->defined(); }
Value mul(Builder& b, const Value& x, const Value& y) { return b.binary("multiply", x, y); }
Value sub(Builder& b, const Value& x, const Value& y) { return b.binary("subtract", x, y); }
Value splat(Builder& b, double v, const Value& like) {
  return b.broadcast_to(b.constant(v, like.element()), like.dims());
}

void check_reduction(int64_t reduction, const char* name) {
  TORCH_CHECK(reduction >= at::Reduction::None && reduction <= at::Reduction::Sum, name,
              ": invalid reduction ", reduction);
}

std::vector<int64_t> all_axes(const Value& v) {
  std::vector<int64_t> axes(v.rank());
  for (int64_t d = 0; d < v.rank(); ++d) axes[d] = d;
  return axes;
}

// The reduced loss: the elementwise losses themselves, their sum or their mean.
Value reduce_loss(Builder& b, const Value& losses, int64_t reduction) {
  if (reduction == at::Reduction::None) return losses;
  Value total =
      b.reduce(losses, b.constant(0, losses.element()), hlo::Reduction::Add, all_axes(losses));
  if (reduction == at::Reduction::Sum) return total;
  int64_t count = 1;
  for (int64_t d : losses.dims()) count *= d;
  return b.binary("divide", total, b.constant(static_cast<double>(count), losses.element()));
}

// The gradient of the reduction: grad_output broadcast to `dims`, divided by `count` for a mean.
Value reduction_grad(Program& p, const at::Tensor& grad_output, int64_t reduction, int64_t count,
                     const std::vector<int64_t>& dims, c10::ScalarType compute) {
  auto& b = p.b();
  Value g = b.broadcast_to(p.read(grad_output, compute), dims);
  if (reduction != at::Reduction::Mean) return g;
  return mul(
      b, g,
      b.broadcast_to(b.constant(1.0 / static_cast<double>(count), element_type(compute)), dims));
}

std::vector<int64_t> loss_shape(const std::vector<int64_t>& shape, int64_t reduction) {
  return reduction == at::Reduction::None ? shape : std::vector<int64_t>{};
}

// ---- binary_cross_entropy ----

void check_bce(const at::Tensor& self, const at::Tensor& target,
               const std::optional<at::Tensor>& weight, int64_t reduction) {
  check_reduction(reduction, "binary_cross_entropy");
  TORCH_CHECK(self.sizes() == target.sizes(), "Using a target size (", target.sizes(),
              ") that is different to the input size (", self.sizes(),
              ") is deprecated. Please ensure they have the same size.");
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"binary_cross_entropy\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(!defined(weight) || at::is_expandable_to(weight->sizes(), self.sizes()),
              "binary_cross_entropy: the weight of shape ", weight->sizes(),
              " cannot be broadcast to the input of shape ", self.sizes());
}

// The device cannot raise, so the program also writes whether any input lies outside
// [0, 1] (NaN included), and the host reads that back: RuntimeError as on the CPU.
void lower_bce(const at::Tensor& self, const at::Tensor& target,
               const std::optional<at::Tensor>& weight, int64_t reduction, const at::Tensor& out) {
  const std::vector<int64_t> dims = self.sizes().vec();
  const c10::ScalarType compute = opmath_type(self.scalar_type());
  at::Tensor bad = at::empty({}, self.options().dtype(c10::kBool));
  Program p("aten::binary_cross_entropy");
  auto& b = p.b();
  Value x = p.read(self, compute);
  Value t = p.read(target, compute);
  Value in_range = b.binary("and", b.compare(Compare::GE, x, splat(b, 0, x)),
                            b.compare(Compare::LE, x, splat(b, 1, x)));
  p.write(bad, b.reduce(b.unary("not", in_range), b.constant(0, hlo::ElementType::Pred),
                        hlo::Reduction::Or, all_axes(x)));
  // PyTorch clamps each log at -100 so that 0 and 1 give finite losses.
  Value floor = splat(b, -100, x);
  Value log_x = b.binary("maximum", b.unary("log", x), floor);
  Value log_1mx = b.binary("maximum", hlo::log_plus_one(b, b.unary("negate", x)), floor);
  Value losses = sub(b, mul(b, sub(b, t, splat(b, 1, t)), log_1mx), mul(b, t, log_x));
  if (defined(weight)) losses = mul(b, losses, b.broadcast_to(p.read(*weight, compute), dims));
  p.write(out, reduce_loss(b, losses, reduction));
  p.run();
  check_later(bad, [](const at::Tensor& host) {
    TORCH_CHECK(!host.item<bool>(), "all elements of input should be between 0 and 1");
  });
}

// ---- smooth_l1_loss and huber_loss ----

enum class Robust { SmoothL1, Huber };

// smooth_l1: |d| < beta ? 0.5 d^2 / beta : |d| - 0.5 beta;
// huber:     |d| < delta ? 0.5 d^2 : delta (|d| - 0.5 delta).
void lower_robust(Robust kind, const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                  double beta, const at::Tensor& out) {
  const std::vector<int64_t> dims = at::infer_size(self.sizes(), target.sizes());
  const c10::ScalarType type = at::result_type(self, target);
  const c10::ScalarType compute = opmath_type(type);
  Program p(kind == Robust::SmoothL1 ? "aten::smooth_l1_loss" : "aten::huber_loss");
  auto& b = p.b();
  Value d = sub(b, b.broadcast_to(p.read(self, compute), dims),
                b.broadcast_to(p.read(target, compute), dims));
  Value z = b.unary("abs", d);
  Value limit = b.broadcast_to(p.scalar(beta, compute), dims);
  Value half = splat(b, 0.5, z);
  Value quadratic = mul(b, mul(b, half, z), z);
  Value linear = sub(b, z, mul(b, half, limit));
  if (kind == Robust::SmoothL1) {
    quadratic = b.binary("divide", quadratic, limit);
  } else {
    linear = mul(b, limit, linear);
  }
  Value losses = b.select(b.compare(Compare::LT, z, limit), quadratic, linear);
  p.write(out, reduce_loss(b, losses, reduction));
  p.run();
}

// d/dx, as the CPU computes it: d <= -limit ? -1 : d >= limit ? 1 : d / beta (smooth_l1) or
// d / delta (huber), times delta for huber. So beta = 0 gives -1 at d = 0, as on the CPU.
void lower_robust_backward(Robust kind, const at::Tensor& grad_output, const at::Tensor& self,
                           const at::Tensor& target, int64_t reduction, double beta,
                           const at::Tensor& grad_input) {
  const std::vector<int64_t> dims = grad_input.sizes().vec();
  const c10::ScalarType compute = opmath_type(grad_input.scalar_type());
  Program p(kind == Robust::SmoothL1 ? "aten::smooth_l1_loss_backward"
                                     : "aten::huber_loss_backward");
  auto& b = p.b();
  Value d = sub(b, b.broadcast_to(p.read(self, compute), dims),
                b.broadcast_to(p.read(target, compute), dims));
  Value limit = b.broadcast_to(p.scalar(beta, compute), dims);
  Value one = splat(b, 1, d);
  Value inside = kind == Robust::SmoothL1 ? b.binary("divide", d, limit) : d;
  Value outside = kind == Robust::SmoothL1 ? one : limit;
  Value slope =
      b.select(b.compare(Compare::LE, d, b.unary("negate", limit)), b.unary("negate", outside),
               b.select(b.compare(Compare::GE, d, limit), outside, inside));
  Value g = reduction_grad(p, grad_output, reduction, self.numel(), dims, compute);
  p.write(grad_input, mul(b, slope, g));
  p.run();
}

std::vector<int64_t> robust_shape(const at::Tensor& self, const at::Tensor& target) {
  return at::infer_size(self.sizes(), target.sizes());
}

at::Tensor robust_grad_input(const at::Tensor& self, const at::Tensor& target) {
  return at::empty(robust_shape(self, target), self.options().dtype(at::result_type(self, target)));
}

void check_beta(double beta) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
}
void check_delta(double delta) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
}

}  // namespace

at::Tensor binary_cross_entropy(const at::Tensor& self, const at::Tensor& target,
                                const std::optional<at::Tensor>& weight, int64_t reduction) {
  check_bce(self, target, weight, reduction);
  at::Tensor out = at::empty(loss_shape(self.sizes().vec(), reduction), self.options());
  lower_bce(self, target, weight, reduction, out);
  return out;
}

at::Tensor& binary_cross_entropy_out(const at::Tensor& self, const at::Tensor& target,
                                     const std::optional<at::Tensor>& weight, int64_t reduction,
                                     at::Tensor& out) {
  check_bce(self, target, weight, reduction);
  at::native::resize_output(out, loss_shape(self.sizes().vec(), reduction));
  lower_bce(self, target, weight, reduction, out);
  return out;
}

// d/dx = w (x - t) / max(x (1 - x), 1e-12), as the CPU computes it.
at::Tensor binary_cross_entropy_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                         const at::Tensor& target,
                                         const std::optional<at::Tensor>& weight,
                                         int64_t reduction) {
  check_bce(self, target, weight, reduction);
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  if (self.numel() == 0) return grad_input;
  const std::vector<int64_t> dims = self.sizes().vec();
  const c10::ScalarType compute = opmath_type(self.scalar_type());
  Program p("aten::binary_cross_entropy_backward");
  auto& b = p.b();
  Value x = p.read(self, compute);
  Value t = p.read(target, compute);
  Value denominator = b.binary("maximum", mul(b, sub(b, splat(b, 1, x), x), x), splat(b, 1e-12, x));
  Value grad = b.binary("divide", sub(b, x, t), denominator);
  if (defined(weight)) grad = mul(b, grad, b.broadcast_to(p.read(*weight, compute), dims));
  grad = mul(b, grad, reduction_grad(p, grad_output, reduction, self.numel(), dims, compute));
  p.write(grad_input, grad);
  p.run();
  return grad_input;
}

// loss = (1 - t) x - (1 + (pos_weight - 1) t) log_sigmoid(x), times weight, in one program
// (the CPU composes it of log_sigmoid and pointwise ops; autograd uses its own formula).
at::Tensor binary_cross_entropy_with_logits(const at::Tensor& self, const at::Tensor& target,
                                            const std::optional<at::Tensor>& weight,
                                            const std::optional<at::Tensor>& pos_weight,
                                            int64_t reduction) {
  check_reduction(reduction, "binary_cross_entropy_with_logits");
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"binary_cross_entropy_with_logits\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  std::vector<int64_t> dims = at::infer_size(self.sizes(), target.sizes());
  if (defined(pos_weight)) dims = at::infer_size(dims, pos_weight->sizes());
  if (defined(weight)) dims = at::infer_size(dims, weight->sizes());
  const c10::ScalarType type = at::result_type(self, target);
  at::Tensor out = at::empty(loss_shape(dims, reduction), self.options().dtype(type));
  const c10::ScalarType compute = opmath_type(type);
  Program p("aten::binary_cross_entropy_with_logits");
  auto& b = p.b();
  Value x = b.broadcast_to(p.read(self, compute), dims);
  Value t = b.broadcast_to(p.read(target, compute), dims);
  Value log_sigmoid =
      sub(b, b.binary("minimum", x, splat(b, 0, x)),
          hlo::log_plus_one(b, b.unary("exponential", b.unary("negate", b.unary("abs", x)))));
  if (defined(pos_weight)) {
    Value pw = b.broadcast_to(p.read(*pos_weight, compute), dims);
    Value log_weight = b.binary("add", mul(b, sub(b, pw, splat(b, 1, pw)), t), splat(b, 1, t));
    log_sigmoid = mul(b, log_sigmoid, log_weight);
  }
  Value losses = sub(b, mul(b, sub(b, splat(b, 1, t), t), x), log_sigmoid);
  if (defined(weight)) losses = mul(b, losses, b.broadcast_to(p.read(*weight, compute), dims));
  p.write(out, reduce_loss(b, losses, reduction));
  p.run();
  return out;
}

// log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)). The buffer is empty, as on CUDA: the
// backward recomputes what it needs from the input.
std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self,
                                                             at::Tensor& output,
                                                             at::Tensor& buffer) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"log_sigmoid_forward\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  at::native::resize_output(output, self.sizes());
  at::native::resize_output(buffer, {0});
  if (self.numel() == 0) return {output, buffer};
  const c10::ScalarType compute = opmath_type(self.scalar_type());
  Program p("aten::log_sigmoid_forward");
  auto& b = p.b();
  Value x = p.read(self, compute);
  Value softplus_neg_abs =
      hlo::log_plus_one(b, b.unary("exponential", b.unary("negate", b.unary("abs", x))));
  p.write(output, sub(b, b.binary("minimum", x, splat(b, 0, x)), softplus_neg_abs));
  p.run();
  return {output, buffer};
}

std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  at::Tensor output = at::empty(self.sizes(), self.options());
  at::Tensor buffer = at::empty({0}, self.options());
  log_sigmoid_forward_out(self, output, buffer);
  return {output, buffer};
}

// d/dx = (x < 0 ? 1 : 0) - (x < 0 ? 1 : -1) * z / (1 + z) with z = exp(-|x|), i.e. sigmoid(-x).
at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                     const at::Tensor& /*buffer*/, at::Tensor& grad_input) {
  const std::vector<int64_t> dims = at::infer_size(grad_output.sizes(), self.sizes());
  at::native::resize_output(grad_input, dims);
  if (grad_input.numel() == 0) return grad_input;
  const c10::ScalarType compute = opmath_type(self.scalar_type());
  Program p("aten::log_sigmoid_backward");
  auto& b = p.b();
  Value x = b.broadcast_to(p.read(self, compute), dims);
  Value g = b.broadcast_to(p.read(grad_output, compute), dims);
  Value z = b.unary("exponential", b.unary("negate", b.unary("abs", x)));
  Value ratio = b.binary("divide", z, b.binary("add", splat(b, 1, z), z));
  Value negative = b.compare(Compare::LT, x, splat(b, 0, x));
  Value slope = b.select(negative, sub(b, splat(b, 1, ratio), ratio), ratio);
  p.write(grad_input, mul(b, g, slope));
  p.run();
  return grad_input;
}

at::Tensor log_sigmoid_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                const at::Tensor& buffer) {
  at::Tensor grad_input = at::empty({0}, grad_output.options());
  return log_sigmoid_backward_out(grad_output, self, buffer, grad_input);
}

at::Tensor smooth_l1_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                          double beta) {
  check_reduction(reduction, "smooth_l1_loss");
  check_beta(beta);
  at::Tensor out = at::empty(loss_shape(robust_shape(self, target), reduction),
                             self.options().dtype(at::result_type(self, target)));
  lower_robust(Robust::SmoothL1, self, target, reduction, beta, out);
  return out;
}

at::Tensor& smooth_l1_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                               double beta, at::Tensor& out) {
  check_reduction(reduction, "smooth_l1_loss");
  check_beta(beta);
  at::native::resize_output(out, loss_shape(robust_shape(self, target), reduction));
  lower_robust(Robust::SmoothL1, self, target, reduction, beta, out);
  return out;
}

at::Tensor smooth_l1_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                   const at::Tensor& target, int64_t reduction, double beta) {
  at::Tensor grad_input = robust_grad_input(self, target);
  lower_robust_backward(Robust::SmoothL1, grad_output, self, target, reduction, beta, grad_input);
  return grad_input;
}

at::Tensor& smooth_l1_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                        const at::Tensor& target, int64_t reduction, double beta,
                                        at::Tensor& grad_input) {
  at::native::resize_output(grad_input, robust_shape(self, target));
  lower_robust_backward(Robust::SmoothL1, grad_output, self, target, reduction, beta, grad_input);
  return grad_input;
}

at::Tensor huber_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                      double delta) {
  check_reduction(reduction, "huber_loss");
  check_delta(delta);
  at::Tensor out = at::empty(loss_shape(robust_shape(self, target), reduction),
                             self.options().dtype(at::result_type(self, target)));
  lower_robust(Robust::Huber, self, target, reduction, delta, out);
  return out;
}

at::Tensor& huber_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                           double delta, at::Tensor& out) {
  check_reduction(reduction, "huber_loss");
  check_delta(delta);
  at::native::resize_output(out, loss_shape(robust_shape(self, target), reduction));
  lower_robust(Robust::Huber, self, target, reduction, delta, out);
  return out;
}

at::Tensor huber_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                               const at::Tensor& target, int64_t reduction, double delta) {
  at::Tensor grad_input = robust_grad_input(self, target);
  lower_robust_backward(Robust::Huber, grad_output, self, target, reduction, delta, grad_input);
  return grad_input;
}

at::Tensor& huber_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    const at::Tensor& target, int64_t reduction, double delta,
                                    at::Tensor& grad_input) {
  at::native::resize_output(grad_input, robust_shape(self, target));
  lower_robust_backward(Robust::Huber, grad_output, self, target, reduction, delta, grad_input);
  return grad_input;
}

}  // namespace tpu::aten
