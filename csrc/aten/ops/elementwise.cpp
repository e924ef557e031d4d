// Elementwise arithmetic: add, sub, mul, div (Tensor and Scalar, functional,
// in-place and out=), relu and its backward, with PyTorch's type promotion.
#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

enum class Op { Add, Sub, Mul, Div };

const char* stablehlo_name(Op op) {
  switch (op) {
    case Op::Add: return "add";
    case Op::Sub: return "subtract";
    case Op::Mul: return "multiply";
    case Op::Div: return "divide";
  }
  return "add";
}

// The right-hand operand: a tensor (tpu, or a CPU scalar tensor) or a Scalar.
struct Operand {
  const at::Tensor* tensor = nullptr;
  const c10::Scalar* scalar = nullptr;
};

c10::ScalarType result_type(Op op, const at::Tensor& self, const Operand& other) {
  c10::ScalarType type = other.tensor != nullptr ? at::result_type(self, *other.tensor)
                                                 : at::result_type(self, *other.scalar);
  if (op == Op::Div && c10::isIntegralType(type, /*includeBool=*/true)) {
    return c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  return type;
}

std::vector<int64_t> result_shape(const at::Tensor& self, const Operand& other) {
  if (other.tensor == nullptr) return self.sizes().vec();
  return at::infer_size(self.sizes(), other.tensor->sizes());
}

// A new tpu tensor for a result of `shape`: laid out like `like` when it has that
// shape (as TensorIterator does: see new_empty_like), contiguous otherwise.
at::Tensor new_output(const std::vector<int64_t>& shape, c10::ScalarType type,
                      const at::Tensor& like, c10::Device device) {
  if (like.sizes() == c10::IntArrayRef(shape) && like.device() == device) {
    return new_empty_like(like, type);
  }
  return new_empty(shape, like.options().dtype(type).device(device));
}

void check_output(const at::Tensor& out, c10::ScalarType type, const std::vector<int64_t>& shape,
                  bool in_place) {
  TORCH_CHECK(at::canCast(type, out.scalar_type()), "result type ", type,
              " can't be cast to the desired output type ", out.scalar_type());
  if (in_place) {
    TORCH_CHECK(out.sizes() == c10::IntArrayRef(shape), "output with shape ", out.sizes(),
                " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  }
  at::assert_no_internal_overlap(out);
}

// out = self (op) alpha * other, computed in `compute` and stored in out's dtype.
// out = self (op) alpha * other, computed in `common` and stored in out's dtype.
// Float16/bfloat16 compute in float32 and round once, as the CPU does; there add
// and sub first round a scalar `other` and alpha to the tensor dtype, while mul
// and div use the scalar at float32 precision (again as the CPU kernels do).
void lower(const char* name, Op op, const at::Tensor& self, const Operand& other,
           const c10::Scalar* alpha, c10::ScalarType common, const at::Tensor& out) {
  const c10::ScalarType math = opmath_type(common);
  const c10::ScalarType scalar_type = op == Op::Add || op == Op::Sub ? common : math;
  if (other.tensor != nullptr) at::assert_no_partial_overlap(out, *other.tensor);
  at::assert_no_partial_overlap(out, self);
  const bool alpha_is_one =
      alpha == nullptr || (alpha->isIntegral(true) && alpha->to<int64_t>() == 1);
  PreparedCall call(name, {&self, other.tensor, &out}, {other.scalar, alpha},
                    {static_cast<int64_t>(op), static_cast<int64_t>(common), alpha_is_one});
  if (call.run()) return;
  std::vector<int64_t> shape = out.sizes().vec();
  Program p(name, &call);
  auto& b = p.b();
  const hlo::ElementType math_type = element_type(math);
  auto load = [&](const at::Tensor& t) {
    bool wrapped_scalar = t.is_cpu() && t.dim() == 0;  // a Python number
    return b.broadcast_to(b.convert(p.read(t, wrapped_scalar ? scalar_type : common), math_type),
                          shape);
  };
  hlo::Value lhs = load(self);
  hlo::Value rhs =
      other.tensor != nullptr
          ? load(*other.tensor)
          : b.broadcast_to(b.convert(p.scalar(*other.scalar, scalar_type), math_type), shape);
  if (!alpha_is_one) {
    hlo::Value factor = b.convert(p.scalar(*alpha, common), math_type);
    rhs = b.binary("multiply", rhs, b.broadcast_to(factor, shape));
  }
  p.write(out, b.binary(stablehlo_name(op), lhs, rhs));
  p.run();
}

void check_operands(Op op, const at::Tensor& self, const Operand& other, const c10::Scalar* alpha,
                    c10::ScalarType type) {
  if (op == Op::Sub) {
    if (other.tensor != nullptr) {
      at::native::sub_check(self, *other.tensor);
    } else {  // as sub_check on the scalar wrapped in a tensor, as the CPU's sub.Scalar does
      const bool bool_self = self.scalar_type() == c10::kBool;
      TORCH_CHECK(!bool_self || !other.scalar->isBoolean(),
                  "Subtraction, the `-` operator, with two bool tensors is not supported. "
                  "Use the `^` or `logical_xor()` operator instead.");
      TORCH_CHECK(!bool_self && !other.scalar->isBoolean(),
                  "Subtraction, the `-` operator, with a bool tensor is not supported. "
                  "If you are trying to invert a mask, use the `~` or `logical_not()` operator "
                  "instead.");
    }
  }
  if (alpha != nullptr) {
    at::native::alpha_check(type, *alpha);
    // alpha must fit the result dtype (the CPU raises otherwise; `other` may wrap).
    AT_DISPATCH_V2(type, "alpha", AT_WRAP([&] { (void)alpha->to<scalar_t>(); }),
                   AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), c10::kBool, c10::kHalf, c10::kBFloat16,
                   c10::kComplexHalf, AT_EXPAND(AT_FLOAT8_TYPES));
  }
}

at::Tensor functional(const char* name, Op op, const at::Tensor& self, const Operand& other,
                      const c10::Scalar* alpha = nullptr) {
  c10::ScalarType type = result_type(op, self, other);
  check_operands(op, self, other, alpha, type);
  std::vector<int64_t> shape = result_shape(self, other);
  // `self` may be a CPU scalar tensor when `other` is on tpu: the result goes to tpu.
  c10::Device device =
      other.tensor != nullptr && self.is_cpu() ? other.tensor->device() : self.device();
  const at::Tensor& like =
      other.tensor != nullptr && self.sizes() != c10::IntArrayRef(shape) ? *other.tensor : self;
  at::Tensor out = new_output(shape, type, like, device);
  lower(name, op, self, other, alpha, type, out);
  return out;
}

at::Tensor& in_place(const char* name, Op op, at::Tensor& self, const Operand& other,
                     const c10::Scalar* alpha = nullptr) {
  c10::ScalarType type = result_type(op, self, other);
  check_operands(op, self, other, alpha, type);
  check_output(self, type, result_shape(self, other), /*in_place=*/true);
  lower(name, op, self, other, alpha, type, self);
  return self;
}

at::Tensor& out_variant(const char* name, Op op, const at::Tensor& self, const Operand& other,
                        const c10::Scalar* alpha, at::Tensor& out) {
  c10::ScalarType type = result_type(op, self, other);
  check_operands(op, self, other, alpha, type);
  std::vector<int64_t> shape = result_shape(self, other);
  check_output(out, type, shape, /*in_place=*/false);
  at::native::resize_output(out, shape);
  lower(name, op, self, other, alpha, type, out);
  return out;
}

Operand tensor(const at::Tensor& t) { return Operand{&t, nullptr}; }
Operand scalar(const c10::Scalar& s) { return Operand{nullptr, &s}; }

}  // namespace

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return functional("aten::add.Tensor", Op::Add, self, tensor(other), &alpha);
}
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return in_place("aten::add_.Tensor", Op::Add, self, tensor(other), &alpha);
}
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                    at::Tensor& out) {
  return out_variant("aten::add.out", Op::Add, self, tensor(other), &alpha, out);
}
at::Tensor add_scalar(const at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha) {
  return functional("aten::add.Scalar", Op::Add, self, scalar(other), &alpha);
}
at::Tensor& add_scalar_(at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha) {
  return in_place("aten::add_.Scalar", Op::Add, self, scalar(other), &alpha);
}

at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return functional("aten::sub.Tensor", Op::Sub, self, tensor(other), &alpha);
}
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return in_place("aten::sub_.Tensor", Op::Sub, self, tensor(other), &alpha);
}
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha,
                    at::Tensor& out) {
  return out_variant("aten::sub.out", Op::Sub, self, tensor(other), &alpha, out);
}
at::Tensor sub_scalar(const at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha) {
  return functional("aten::sub.Scalar", Op::Sub, self, scalar(other), &alpha);
}
at::Tensor& sub_scalar_(at::Tensor& self, const c10::Scalar& other, const c10::Scalar& alpha) {
  return in_place("aten::sub_.Scalar", Op::Sub, self, scalar(other), &alpha);
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  return functional("aten::mul.Tensor", Op::Mul, self, tensor(other));
}
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  return in_place("aten::mul_.Tensor", Op::Mul, self, tensor(other));
}
at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return out_variant("aten::mul.out", Op::Mul, self, tensor(other), nullptr, out);
}
at::Tensor mul_scalar(const at::Tensor& self, const c10::Scalar& other) {
  return functional("aten::mul.Scalar", Op::Mul, self, scalar(other));
}
at::Tensor& mul_scalar_(at::Tensor& self, const c10::Scalar& other) {
  return in_place("aten::mul_.Scalar", Op::Mul, self, scalar(other));
}

at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  return functional("aten::div.Tensor", Op::Div, self, tensor(other));
}
at::Tensor& div_(at::Tensor& self, const at::Tensor& other) {
  return in_place("aten::div_.Tensor", Op::Div, self, tensor(other));
}
at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return out_variant("aten::div.out", Op::Div, self, tensor(other), nullptr, out);
}
at::Tensor div_scalar(const at::Tensor& self, const c10::Scalar& other) {
  return functional("aten::div.Scalar", Op::Div, self, scalar(other));
}
at::Tensor& div_scalar_(at::Tensor& self, const c10::Scalar& other) {
  return in_place("aten::div_.Scalar", Op::Div, self, scalar(other));
}

namespace {
// relu(x) = max(x, 0); out may be `self` (relu_).
void lower_relu(const char* name, const at::Tensor& self, const at::Tensor& out) {
  TORCH_CHECK(self.scalar_type() != c10::kBool, "relu is not supported for bool tensors");
  PreparedCall call(name, {&self, &out}, {});
  if (call.run()) return;
  Program p(name, &call);
  auto& b = p.b();
  hlo::Value x = p.read(self);
  hlo::Value zero = b.broadcast_to(b.constant(0, x.element()), x.dims());
  p.write(out, b.binary("maximum", x, zero));
  p.run();
}
}  // namespace

at::Tensor relu(const at::Tensor& self) {
  at::Tensor out = new_output(self.sizes().vec(), self.scalar_type(), self, self.device());
  lower_relu("aten::relu", self, out);
  return out;
}

at::Tensor& relu_(at::Tensor& self) {
  at::assert_no_internal_overlap(self);
  lower_relu("aten::relu_", self, self);
  return self;
}

at::Tensor threshold_backward(const at::Tensor& grad_output, const at::Tensor& self,
                              const c10::Scalar& threshold) {
  c10::ScalarType type = at::result_type(grad_output, self);
  std::vector<int64_t> shape = at::infer_size(grad_output.sizes(), self.sizes());
  at::Tensor out = new_output(shape, type, grad_output, grad_output.device());
  Program p("aten::threshold_backward");
  auto& b = p.b();
  hlo::Value grad = b.broadcast_to(p.read(grad_output, type), shape);
  hlo::Value x = b.broadcast_to(p.read(self, type), shape);
  hlo::Value limit = b.broadcast_to(p.scalar(threshold, type), shape);
  hlo::Value zero = b.broadcast_to(b.constant(0, element_type(type)), shape);
  p.write(out, b.select(b.compare(hlo::Compare::LE, x, limit), zero, grad));
  p.run();
  return out;
}

}  // namespace tpu::aten
