// softmax and log_softmax, and their backward. The forward subtracts the row maximum first,
// so large logits never overflow the exponential.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include <limits>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Value;

// The reduction over `dim` of x, broadcast back to x's shape.
Value reduce_keep(Builder& b, const Value& x, double init, hlo::Reduction kind, int64_t dim) {
  Value total = b.reduce(x, b.constant(init, x.element()), kind, {dim});
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d != dim) kept.push_back(d);
  }
  return b.broadcast_in_dim(total, x.dims(), kept);
}

c10::ScalarType forward_type(const char* name, const at::Tensor& self, bool half_to_float) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"", name,
                              "\" not implemented for '", c10::toString(self.scalar_type()), "'");
  if (half_to_float) {
    TORCH_CHECK(self.scalar_type() == c10::kHalf, "conversion is supported for Half type only");
    return c10::kFloat;
  }
  return self.scalar_type();
}

// A 0-dim tensor is a row of one element.
std::vector<int64_t> working_shape(const at::Tensor& t) {
  return t.dim() == 0 ? std::vector<int64_t>{1} : t.sizes().vec();
}

void lower_forward(const char* name, const at::Tensor& self, int64_t dim, bool log,
                   const at::Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  const c10::ScalarType compute = opmath_type(out.scalar_type());
  PreparedCall call(name, {&self, &out}, {}, {dim, log});
  if (call.run()) return;
  Program p(name, &call);
  auto& b = p.b();
  Value x = b.reshape(p.read(self, compute), working_shape(self));
  Value shifted = b.binary(
      "subtract", x,
      reduce_keep(b, x, -std::numeric_limits<double>::infinity(), hlo::Reduction::Max, dim));
  Value e = b.unary("exponential", shifted);
  Value total = reduce_keep(b, e, 0, hlo::Reduction::Add, dim);
  Value result =
      log ? b.binary("subtract", shifted, b.unary("log", total)) : b.binary("divide", e, total);
  p.write(out, b.reshape(result, self.sizes().vec()));
  p.run();
}

at::Tensor forward(const char* name, const at::Tensor& self, int64_t dim, bool half_to_float,
                   bool log) {
  at::Tensor out =
      at::empty(self.sizes(), self.options().dtype(forward_type(name, self, half_to_float)));
  lower_forward(name, self, dim, log, out);
  return out;
}

at::Tensor& forward_out(const char* name, const at::Tensor& self, int64_t dim, bool half_to_float,
                        bool log, at::Tensor& out) {
  c10::ScalarType type = forward_type(name, self, half_to_float);
  TORCH_CHECK(out.scalar_type() == type, "Expected out tensor to have dtype ", type, ", but got ",
              out.scalar_type(), " instead");
  at::native::resize_output(out, self.sizes());
  lower_forward(name, self, dim, log, out);
  return out;
}

// softmax: grad_input = y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
void lower_backward(const char* name, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                    bool log, const at::Tensor& grad_input) {
  dim = at::maybe_wrap_dim(dim, grad.dim());
  TORCH_CHECK(grad.sizes() == output.sizes(), name,
              ": grad_output and output must have the "
              "same shape, got ",
              grad.sizes(), " and ", output.sizes());
  const c10::ScalarType compute = opmath_type(grad.scalar_type());
  PreparedCall call(name, {&grad, &output, &grad_input}, {}, {dim, log});
  if (call.run()) return;
  Program p(name, &call);
  auto& b = p.b();
  std::vector<int64_t> shape = working_shape(grad);
  Value g = b.reshape(p.read(grad, compute), shape);
  Value y = b.reshape(p.read(output, compute), shape);
  Value result;
  if (log) {
    Value total = reduce_keep(b, g, 0, hlo::Reduction::Add, dim);
    result = b.binary("subtract", g, b.binary("multiply", b.unary("exponential", y), total));
  } else {
    Value total = reduce_keep(b, b.binary("multiply", g, y), 0, hlo::Reduction::Add, dim);
    result = b.binary("multiply", y, b.binary("subtract", g, total));
  }
  p.write(grad_input, b.reshape(result, grad.sizes().vec()));
  p.run();
}

c10::ScalarType backward_type(const char* name, const at::Tensor& grad,
                              c10::ScalarType input_dtype) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(grad.scalar_type()), "\"", name,
                              "\" not implemented for '", c10::toString(grad.scalar_type()), "'");
  // half_to_float forward: the gradient arrives in float and goes back in half.
  return grad.scalar_type() == c10::kFloat && input_dtype == c10::kHalf ? c10::kHalf
                                                                        : grad.scalar_type();
}

}  // namespace

at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  return forward("aten::_softmax", self, dim, half_to_float, false);
}
at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  return forward_out("aten::_softmax.out", self, dim, half_to_float, false, out);
}
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  return forward("aten::_log_softmax", self, dim, half_to_float, true);
}
at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float,
                            at::Tensor& out) {
  return forward_out("aten::_log_softmax.out", self, dim, half_to_float, true, out);
}

at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype) {
  const char* name = "aten::_softmax_backward_data";
  at::Tensor out =
      at::empty(grad.sizes(), grad.options().dtype(backward_type(name, grad, input_dtype)));
  lower_backward(name, grad, output, dim, false, out);
  return out;
}
at::Tensor& softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 c10::ScalarType input_dtype, at::Tensor& grad_input) {
  const char* name = "aten::_softmax_backward_data.out";
  (void)backward_type(name, grad, input_dtype);
  at::native::resize_output(grad_input, grad.sizes());
  lower_backward(name, grad, output, dim, false, grad_input);
  return grad_input;
}
at::Tensor log_softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                c10::ScalarType input_dtype) {
  const char* name = "aten::_log_softmax_backward_data";
  at::Tensor out =
      at::empty(grad.sizes(), grad.options().dtype(backward_type(name, grad, input_dtype)));
  lower_backward(name, grad, output, dim, true, out);
  return out;
}
at::Tensor& log_softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                     c10::ScalarType input_dtype, at::Tensor& grad_input) {
  const char* name = "aten::_log_softmax_backward_data.out";
  (void)backward_type(name, grad, input_dtype);
  at::native::resize_output(grad_input, grad.sizes());
  lower_backward(name, grad, output, dim, true, grad_input);
  return grad_input;
}

}  // namespace tpu::aten
