// Binary elementwise ops beyond arithmetic: comparisons, maximum/minimum, pow,
// fmod/remainder, floor and truncating division, atan2, bitwise and logical ops. Each op is
// one lowering; the Tensor/Scalar, functional/in-place/out= kernels come from TPU_BINARY_OPS.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>

#include <stdexcept>
#include <utility>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"
#include "hlo/arithmetic.h"
#include "hlo/trig.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Value;

Value zeros_like(Builder& b, const Value& x) {
  return b.broadcast_to(b.constant(0, x.element()), x.dims());
}

Value truthy(Builder& b, const Value& x) {
  if (x.element() == hlo::ElementType::Pred) return x;
  return b.compare(hlo::Compare::NE, x, zeros_like(b, x));
}

bool is_float_like(c10::ScalarType t) { return c10::isFloatingType(t) || c10::isComplexType(t); }

}  // namespace

namespace binary {

Value eq(Builder& b, const Value& x, const Value& y) { return b.compare(hlo::Compare::EQ, x, y); }
Value ne(Builder& b, const Value& x, const Value& y) { return b.compare(hlo::Compare::NE, x, y); }
Value lt(Builder& b, const Value& x, const Value& y) { return b.compare(hlo::Compare::LT, x, y); }
Value le(Builder& b, const Value& x, const Value& y) { return b.compare(hlo::Compare::LE, x, y); }
Value gt(Builder& b, const Value& x, const Value& y) { return b.compare(hlo::Compare::GT, x, y); }
Value ge(Builder& b, const Value& x, const Value& y) { return b.compare(hlo::Compare::GE, x, y); }
Value maximum(Builder& b, const Value& x, const Value& y) { return b.binary("maximum", x, y); }
Value minimum(Builder& b, const Value& x, const Value& y) { return b.binary("minimum", x, y); }
Value pow(Builder& b, const Value& x, const Value& y) { return b.binary("power", x, y); }
Value atan2(Builder& b, const Value& x, const Value& y) { return hlo::arctangent2(b, x, y); }
Value fmod(Builder& b, const Value& x, const Value& y) { return b.binary("remainder", x, y); }
// Python's modulo: the result takes the divisor's sign.
Value remainder(Builder& b, const Value& x, const Value& y) {
  Value r = b.binary("remainder", x, y);
  Value zero = zeros_like(b, r);
  Value nonzero = b.compare(hlo::Compare::NE, r, zero);
  Value signs_differ = b.compare(hlo::Compare::NE, b.compare(hlo::Compare::LT, r, zero),
                                 b.compare(hlo::Compare::LT, y, zero));
  return b.select(b.binary("and", nonzero, signs_differ), b.binary("add", r, y), r);
}
Value bitwise_and(Builder& b, const Value& x, const Value& y) { return b.binary("and", x, y); }
Value bitwise_or(Builder& b, const Value& x, const Value& y) { return b.binary("or", x, y); }
Value bitwise_xor(Builder& b, const Value& x, const Value& y) { return b.binary("xor", x, y); }
Value logical_and(Builder& b, const Value& x, const Value& y) {
  return b.binary("and", truthy(b, x), truthy(b, y));
}
Value logical_or(Builder& b, const Value& x, const Value& y) {
  return b.binary("or", truthy(b, x), truthy(b, y));
}
Value logical_xor(Builder& b, const Value& x, const Value& y) {
  return b.binary("xor", truthy(b, x), truthy(b, y));
}

}  // namespace binary

namespace {

// The dtype the op computes in, and the dtype of its result.
struct Types {
  c10::ScalarType compute;
  c10::ScalarType result;
};

Types types_for(BinaryKind kind, c10::ScalarType common, const char* name) {
  switch (kind) {
    case BinaryKind::Common: return {common, common};
    case BinaryKind::Numeric:
      TORCH_CHECK_NOT_IMPLEMENTED(common != c10::kBool, "\"", name,
                                  "_cpu\" not implemented for 'Bool'");
      return {common, common};
    case BinaryKind::Compare: return {common, c10::kBool};
    case BinaryKind::Logical: return {common, c10::kBool};
    case BinaryKind::Float: {
      c10::ScalarType f = c10::isIntegralType(common, /*includeBool=*/true)
                              ? c10::typeMetaToScalarType(c10::get_default_dtype())
                              : common;
      return {f, f};
    }
    case BinaryKind::FloatOnly:
      TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(common), "\"", name,
                                  "_cpu\" not implemented for '", c10::toString(common), "'");
      return {common, common};
    case BinaryKind::FloatOrComplex:
      TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(common) || common == c10::kComplexFloat ||
                                      common == c10::kComplexDouble,
                                  "\"", name, "_cpu\" not implemented for '", c10::toString(common),
                                  "'");
      return {common, common};
    case BinaryKind::Integral:
      TORCH_CHECK_NOT_IMPLEMENTED(!is_float_like(common), "\"", name,
                                  "_cpu\" not implemented for '", c10::toString(common), "'");
      return {common, common};
  }
  return {common, common};
}

// Complex numbers have no order: the CPU refuses maximum, minimum, fmax and fmin of them
// (XLA would compare them lexicographically).
void check_ordered(BinaryLowering lowering, c10::ScalarType compute) {
  if (!c10::isComplexType(compute)) return;
  for (auto [ordering, name] :
       {std::pair{&binary::maximum, "maximum"}, std::pair{&binary::minimum, "minimum"},
        std::pair{&binary::fmax, "fmax"}, std::pair{&binary::fmin, "fmin"}}) {
    TORCH_CHECK(lowering != ordering, name, " not implemented for complex tensors.");
  }
}

c10::ScalarType common_type(const BinaryOperand& self, const BinaryOperand& other) {
  if (self.tensor != nullptr && other.tensor != nullptr) {
    return at::result_type(*self.tensor, *other.tensor);
  }
  if (self.tensor != nullptr) return at::result_type(*self.tensor, *other.scalar);
  return at::result_type(*self.scalar, *other.tensor);
}

std::vector<int64_t> shape_of(const BinaryOperand& self, const BinaryOperand& other) {
  if (self.tensor != nullptr && other.tensor != nullptr) {
    return at::infer_size(self.tensor->sizes(), other.tensor->sizes());
  }
  return (self.tensor != nullptr ? self.tensor : other.tensor)->sizes().vec();
}

Value load(Program& p, const BinaryOperand& operand, c10::ScalarType type,
           const std::vector<int64_t>& shape) {
  Value v =
      operand.tensor != nullptr ? p.read(*operand.tensor, type) : p.scalar(*operand.scalar, type);
  return p.b().broadcast_to(v, shape);
}

const at::Tensor& device_tensor(const BinaryOperand& self, const BinaryOperand& other) {
  if (self.tensor != nullptr && !self.tensor->is_cpu()) return *self.tensor;
  return other.tensor != nullptr && !other.tensor->is_cpu() ? *other.tensor : *self.tensor;
}

bool is_division(BinaryLowering lowering);  // floor/trunc division, fmod, remainder

// Integer division by zero raises on the CPU (RuntimeError "ZeroDivisionError"); XLA returns a
// value instead. A scalar divisor is checked here; a tpu tensor by a small program whose
// result check_later() reads (at once, or when a deferred graph runs).
void check_integer_divisor(const BinaryOperand& divisor, c10::ScalarType compute) {
  if (divisor.scalar != nullptr) {
    TORCH_CHECK(divisor.scalar->toLong() != 0, "ZeroDivisionError");
    return;
  }
  const at::Tensor& tensor = *divisor.tensor;
  if (tensor.is_cpu()) {  // a wrapped number or 0-d CPU tensor; others fail the device check
    TORCH_CHECK(tensor.numel() != 1 || tensor.item().toLong() != 0, "ZeroDivisionError");
    return;
  }
  at::Tensor any_zero = at::empty({}, tensor.options().dtype(c10::kBool));
  Program p("tpu::integer_divisor_check");
  auto& b = p.b();
  Value y = b.reshape(p.read(tensor, compute), {tensor.numel()});
  Value zero = b.compare(hlo::Compare::EQ, y, zeros_like(b, y));
  p.write(any_zero, b.reduce(zero, b.constant(0, hlo::ElementType::Pred), hlo::Reduction::Or, {0}));
  p.run();
  check_later(any_zero,
              [](const at::Tensor& host) { TORCH_CHECK(!host.item<bool>(), "ZeroDivisionError"); });
}

// Exponents PyTorch's CPU pow(Tensor, Scalar) computes by a formula instead of pow() for float
// and double (and bfloat16 for -1): x * x for 2, x * x * x for 3, 1 / (x * x) for -2, 1 / x for
// -1. We take the same formulas: the results are the CPU's to the bit, and XLA:CPU would call
// libm's scalar powf per element, 11x slower than x * x for x ** 2. (0.5 and -0.5, which the CPU
// computes as sqrt and 1 / sqrt, keep pow: XLA:CPU's sqrt is an ulp off for some inputs.)
enum class PowExponent : int64_t { Any, MinusOne, Two, Three, MinusTwo };

PowExponent special_exponent(BinaryLowering lowering, const BinaryOperand& other,
                             c10::ScalarType compute) {
  if (lowering != &binary::pow || other.scalar == nullptr || other.scalar->isComplex() ||
      other.scalar->isBoolean()) {
    return PowExponent::Any;
  }
  const bool full = compute == c10::kFloat || compute == c10::kDouble;
  if (!full && compute != c10::kBFloat16) return PowExponent::Any;
  const double e = other.scalar->toDouble();
  if (e == -1.0) return PowExponent::MinusOne;
  if (!full) return PowExponent::Any;
  if (e == 2.0) return PowExponent::Two;
  if (e == 3.0) return PowExponent::Three;
  if (e == -2.0) return PowExponent::MinusTwo;
  return PowExponent::Any;
}

Value special_pow(Builder& b, const Value& x, PowExponent exponent) {
  auto one = [&] { return b.broadcast_to(b.constant(1, x.element()), x.dims()); };
  switch (exponent) {
    case PowExponent::MinusOne: return b.binary("divide", one(), x);
    case PowExponent::Two: return b.binary("multiply", x, x);
    case PowExponent::Three: return b.binary("multiply", b.binary("multiply", x, x), x);
    case PowExponent::MinusTwo: return b.binary("divide", one(), b.binary("multiply", x, x));
    case PowExponent::Any: break;
  }
  throw std::logic_error("special_pow: not a special exponent");
}

void run(const char* name, BinaryLowering lowering, c10::ScalarType compute,
         const BinaryOperand& self, const BinaryOperand& other, const at::Tensor& out) {
  for (const BinaryOperand* operand : {&self, &other}) {
    if (operand->tensor != nullptr) at::assert_no_partial_overlap(out, *operand->tensor);
  }
  if (out.numel() > 0 && c10::isIntegralType(compute, /*includeBool=*/true) &&
      is_division(lowering)) {
    check_integer_divisor(other, compute);
  }
  std::vector<int64_t> shape = out.sizes().vec();
  // Comparisons, and nextafter, which steps the bits of the dtype itself, compute in it.
  const bool compares = lowering == &binary::eq || lowering == &binary::ne ||
                        lowering == &binary::lt || lowering == &binary::le ||
                        lowering == &binary::gt || lowering == &binary::ge ||
                        lowering == &binary::nextafter;
  const PowExponent exponent = special_exponent(lowering, other, compute);
  if (!compares) compute = opmath_type(compute);
  PreparedCall call(name, {self.tensor, other.tensor, &out}, {self.scalar, other.scalar},
                    {reinterpret_cast<int64_t>(lowering), static_cast<int64_t>(compute),
                     static_cast<int64_t>(exponent)});
  if (call.run()) return;
  Program p(name, &call);
  Value x = load(p, self, compute, shape);
  Value y = load(p, other, compute, shape);  // a parameter even where the formula ignores it
  p.write(out,
          exponent == PowExponent::Any ? lowering(p.b(), x, y) : special_pow(p.b(), x, exponent));
  p.run();
}

}  // namespace

at::Tensor binary_functional(const char* name, BinaryLowering lowering, BinaryKind kind,
                             const BinaryOperand& self, const BinaryOperand& other) {
  Types t = types_for(kind, common_type(self, other), name);
  check_ordered(lowering, t.compute);
  const at::Tensor& device = device_tensor(self, other);
  at::Tensor out = new_empty(shape_of(self, other), device.options().dtype(t.result));
  run(name, lowering, t.compute, self, other, out);
  return out;
}

at::Tensor& binary_in_place(const char* name, BinaryLowering lowering, BinaryKind kind,
                            at::Tensor& self, const BinaryOperand& other) {
  BinaryOperand lhs{&self, nullptr};
  Types t = types_for(kind, common_type(lhs, other), name);
  check_ordered(lowering, t.compute);
  TORCH_CHECK(at::canCast(t.result, self.scalar_type()), "result type ", t.result,
              " can't be cast to the desired output type ", self.scalar_type());
  std::vector<int64_t> shape = shape_of(lhs, other);
  TORCH_CHECK(self.sizes() == c10::IntArrayRef(shape), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
  at::assert_no_internal_overlap(self);
  run(name, lowering, t.compute, lhs, other, self);
  return self;
}

at::Tensor& binary_out(const char* name, BinaryLowering lowering, BinaryKind kind,
                       const BinaryOperand& self, const BinaryOperand& other, at::Tensor& out) {
  Types t = types_for(kind, common_type(self, other), name);
  check_ordered(lowering, t.compute);
  TORCH_CHECK(at::canCast(t.result, out.scalar_type()), "result type ", t.result,
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, shape_of(self, other));
  at::assert_no_internal_overlap(out);
  run(name, lowering, t.compute, self, other, out);
  return out;
}

// ---- div with rounding_mode; floor_divide --------------------------------------------------

namespace {

// Half-precision floor and trunc division compute in float32 but round every intermediate to
// the inputs' precision, as the CPU's half-precision kernels do (17.97 becomes 18 in bfloat16
// before truncating); other dtypes compute exactly.
using Rounding = Value (*)(Builder&, const Value&);
Value exact(Builder&, const Value& v) { return v; }
template <hlo::ElementType Half>
Value to_half(Builder& b, const Value& v) {
  return b.convert(b.convert(v, Half), v.element());
}

// Python's floor division. Floats follow c10::div_floor_floating, which derives the quotient
// from fmod so it is exact where floor(x / y) would round the wrong way; integers correct the
// truncating quotient when the remainder's sign differs from the divisor's.
template <Rounding round>
Value div_floor(Builder& b, const Value& x, const Value& y) {
  Value zero = zeros_like(b, x);
  Value one = b.broadcast_to(b.constant(1, x.element()), x.dims());
  Value mod = round(b, b.binary("remainder", x, y));
  Value signs_differ = b.compare(hlo::Compare::NE, b.compare(hlo::Compare::LT, mod, zero),
                                 b.compare(hlo::Compare::LT, y, zero));
  Value adjust = b.binary("and", b.compare(hlo::Compare::NE, mod, zero), signs_differ);
  if (!hlo::is_float(x.element())) {
    Value quotient = b.binary("divide", x, y);
    return b.select(adjust, b.binary("subtract", quotient, one), quotient);
  }
  Value div = round(b, b.binary("divide", round(b, b.binary("subtract", x, mod)), y));
  div = b.select(adjust, round(b, b.binary("subtract", div, one)), div);
  Value floored = b.unary("floor", div);
  Value half = b.broadcast_to(b.constant(0.5, x.element()), x.dims());
  Value fraction = round(b, b.binary("subtract", div, floored));
  floored = b.select(b.compare(hlo::Compare::GT, fraction, half),
                     round(b, b.binary("add", floored, one)), floored);
  // a zero quotient keeps the sign of x / y (-0 included: the sign bit, not `< 0`); division
  // by zero gives x / y's infinity or NaN
  Value quotient = round(b, b.binary("divide", x, y));
  Value signed_zero = b.select(hlo::sign_bit_set(b, quotient), b.unary("negate", zero), zero);
  Value result = b.select(b.compare(hlo::Compare::EQ, div, zero), signed_zero, floored);
  return b.select(b.compare(hlo::Compare::EQ, y, zero), quotient, result);
}

template <Rounding round>
Value div_trunc(Builder& b, const Value& x, const Value& y) {
  Value quotient = b.binary("divide", x, y);  // integer division truncates already
  return hlo::is_float(x.element()) ? unary::trunc(b, round(b, quotient)) : quotient;
}

BinaryLowering floor_lowering(c10::ScalarType type) {
  switch (type) {
    case c10::kBFloat16: return &div_floor<&to_half<hlo::ElementType::BF16>>;
    case c10::kHalf: return &div_floor<&to_half<hlo::ElementType::F16>>;
    default: return &div_floor<&exact>;
  }
}

BinaryLowering trunc_lowering(c10::ScalarType type) {
  switch (type) {
    case c10::kBFloat16: return &div_trunc<&to_half<hlo::ElementType::BF16>>;
    case c10::kHalf: return &div_trunc<&to_half<hlo::ElementType::F16>>;
    default: return &div_trunc<&exact>;
  }
}

bool is_division(BinaryLowering lowering) {
  return lowering == &binary::fmod || lowering == &binary::remainder ||
         lowering == &div_floor<&exact> || lowering == &div_trunc<&exact>;
}

// The lowering for a rounding mode, or nullptr for true division (rounding_mode=None).
BinaryLowering rounding_lowering(std::optional<c10::string_view> mode, const at::Tensor& self,
                                 const at::Tensor& other) {
  if (!mode.has_value()) return nullptr;
  if (*mode == "floor") return floor_lowering(at::result_type(self, other));
  if (*mode == "trunc") return trunc_lowering(at::result_type(self, other));
  TORCH_CHECK(false,
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
              *mode, "'");
}

BinaryOperand operand(const at::Tensor& tensor) { return BinaryOperand{&tensor, nullptr}; }

}  // namespace

at::Tensor div_mode(const at::Tensor& self, const at::Tensor& other,
                    std::optional<c10::string_view> mode) {
  BinaryLowering lowering = rounding_lowering(mode, self, other);
  if (lowering == nullptr) return tpu::aten::div(self, other);
  return binary_functional("aten::div.Tensor_mode", lowering, BinaryKind::Numeric, operand(self),
                           operand(other));
}

at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other,
                      std::optional<c10::string_view> mode) {
  BinaryLowering lowering = rounding_lowering(mode, self, other);
  if (lowering == nullptr) return tpu::aten::div_(self, other);
  return binary_in_place("aten::div_.Tensor_mode", lowering, BinaryKind::Numeric, self,
                         operand(other));
}

at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other,
                         std::optional<c10::string_view> mode, at::Tensor& out) {
  BinaryLowering lowering = rounding_lowering(mode, self, other);
  if (lowering == nullptr) return tpu::aten::div_out(self, other, out);
  return binary_out("aten::div.out_mode", lowering, BinaryKind::Numeric, operand(self),
                    operand(other), out);
}

at::Tensor floor_divide(const at::Tensor& self, const at::Tensor& other) {
  return binary_functional("aten::floor_divide", floor_lowering(at::result_type(self, other)),
                           BinaryKind::Numeric, operand(self), operand(other));
}

at::Tensor& floor_divide_(at::Tensor& self, const at::Tensor& other) {
  return binary_in_place("aten::floor_divide_.Tensor", floor_lowering(at::result_type(self, other)),
                         BinaryKind::Numeric, self, operand(other));
}

at::Tensor& floor_divide_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return binary_out("aten::floor_divide.out", floor_lowering(at::result_type(self, other)),
                    BinaryKind::Numeric, operand(self), operand(other), out);
}

}  // namespace tpu::aten
