// Pointwise ops with several operands: where, masked_fill, clamp, lerp, addcmul, addcdiv, and the
// NaN/Inf tests.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>

#include <functional>
#include <limits>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

// From the nearer end, as PyTorch's lerp kernels compute it.
hlo::Value lerp(hlo::Builder& b, const hlo::Value& start, const hlo::Value& end,
                const hlo::Value& weight) {
  auto splat = [&](double v) {
    return b.broadcast_to(b.constant(v, weight.element()), weight.dims());
  };
  hlo::Value diff = b.binary("subtract", end, start);
  hlo::Value low = b.binary("add", start, b.binary("multiply", weight, diff));
  hlo::Value high =
      b.binary("subtract", end, b.binary("multiply", diff, b.binary("subtract", splat(1), weight)));
  return b.select(b.compare(hlo::Compare::LT, b.unary("abs", weight), splat(0.5)), low, high);
}

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::Value;

// One operand: a tensor (tpu, or a CPU 0-dim tensor), a Scalar, or absent.
struct Arg {
  const at::Tensor* tensor = nullptr;
  std::optional<c10::Scalar> scalar;
  bool present() const { return tensor != nullptr || scalar.has_value(); }
};
Arg T(const at::Tensor& t) { return Arg{&t, std::nullopt}; }
Arg OT(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? Arg{&*t, std::nullopt} : Arg{};
}
Arg S(const std::optional<c10::Scalar>& s) { return Arg{nullptr, s}; }

// The math over the operands, each broadcast to the result shape in the compute type (absent
// operands are default Values).
using Math = std::function<Value(Builder&, const std::vector<Value>&)>;

c10::ScalarType promote(const std::vector<Arg>& args) {
  at::native::ResultTypeState state = {};
  for (const Arg& a : args) {
    if (a.tensor != nullptr)
      state = at::native::update_result_type_state(*a.tensor, state);
    else if (a.scalar.has_value())
      state = at::native::update_result_type_state(*a.scalar, state);
  }
  return at::native::result_type(state);
}

std::vector<int64_t> broadcast_shape(const std::vector<Arg>& args) {
  std::vector<int64_t> shape;
  for (const Arg& a : args) {
    if (a.tensor != nullptr) shape = at::infer_size(shape, a.tensor->sizes());
  }
  return shape;
}

constexpr size_t kMaxPointwiseArgs = 4;

// Reads every operand as `compute` (operand `bool_operand` as bool), runs math, writes out.
void lower(const char* name, const std::vector<Arg>& args, c10::ScalarType compute,
           const Math& math, const at::Tensor& out, int bool_operand = -1) {
  for (const Arg& a : args) {
    if (a.tensor != nullptr && a.tensor->device() == out.device()) {
      at::assert_no_partial_overlap(out, *a.tensor);
    }
  }
  std::vector<int64_t> shape = out.sizes().vec();
  // Every Math here is fixed by the op's name, the operands present and their dtypes.
  static_assert(kMaxPointwiseArgs == 4, "PreparedCall below lists four operands");
  TORCH_INTERNAL_ASSERT(args.size() <= kMaxPointwiseArgs);
  auto tensor_at = [&](size_t i) { return i < args.size() ? args[i].tensor : nullptr; };
  auto scalar_at = [&](size_t i) -> const c10::Scalar* {
    return i < args.size() && args[i].scalar.has_value() ? &*args[i].scalar : nullptr;
  };
  PreparedCall call(name, {tensor_at(0), tensor_at(1), tensor_at(2), tensor_at(3), &out},
                    {scalar_at(0), scalar_at(1), scalar_at(2), scalar_at(3)},
                    {static_cast<int64_t>(compute), bool_operand});
  if (call.run()) return;
  Program p(name, &call);
  auto& b = p.b();
  std::vector<Value> values;
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& a = args[i];
    c10::ScalarType type = static_cast<int>(i) == bool_operand ? c10::kBool : compute;
    if (a.tensor != nullptr)
      values.push_back(b.broadcast_to(p.read(*a.tensor, type), shape));
    else if (a.scalar.has_value())
      values.push_back(b.broadcast_to(p.scalar(*a.scalar, type), shape));
    else
      values.emplace_back();
  }
  p.write(out, math(b, values));
  p.run();
}

at::Tensor new_out(const std::vector<int64_t>& shape, c10::ScalarType type,
                   const std::vector<Arg>& args) {
  for (const Arg& a : args) {
    if (a.tensor != nullptr && !a.tensor->is_cpu()) {
      // Laid out like that operand where it has the result's shape, as TensorIterator does
      // (clamp of a channels_last tensor is channels_last).
      if (a.tensor->sizes() == c10::IntArrayRef(shape)) return new_empty_like(*a.tensor, type);
      return at::empty(shape, a.tensor->options().dtype(type));
    }
  }
  TORCH_CHECK(false, "expected a tpu tensor operand");
}

void check_out(const at::Tensor& out, c10::ScalarType type) {
  TORCH_CHECK(at::canCast(type, out.scalar_type()), "result type ", type,
              " can't be cast to the desired output type ", out.scalar_type());
  at::assert_no_internal_overlap(out);
}

void check_in_place(const at::Tensor& self, c10::ScalarType type,
                    const std::vector<int64_t>& shape) {
  check_out(self, type);
  TORCH_CHECK(self.sizes() == c10::IntArrayRef(shape), "output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", c10::IntArrayRef(shape));
}

// The three flavours of one op: result type and math are fixed by the caller.
at::Tensor run_functional(const char* name, const std::vector<Arg>& args, c10::ScalarType type,
                          c10::ScalarType compute, const Math& math, int bool_operand = -1) {
  std::vector<int64_t> shape = broadcast_shape(args);
  at::Tensor out = new_out(shape, type, args);
  lower(name, args, compute, math, out, bool_operand);
  return out;
}
at::Tensor& run_out(const char* name, const std::vector<Arg>& args, c10::ScalarType type,
                    c10::ScalarType compute, const Math& math, at::Tensor& out,
                    int bool_operand = -1) {
  check_out(out, type);
  at::native::resize_output(out, broadcast_shape(args));
  lower(name, args, compute, math, out, bool_operand);
  return out;
}
at::Tensor& run_in_place(const char* name, at::Tensor& self, const std::vector<Arg>& args,
                         c10::ScalarType type, c10::ScalarType compute, const Math& math,
                         int bool_operand = -1) {
  check_in_place(self, type, broadcast_shape(args));
  lower(name, args, compute, math, self, bool_operand);
  return self;
}

Value splat(Builder& b, double v, const Value& like) {
  return b.broadcast_to(b.constant(v, like.element()), like.dims());
}

// ---- where ----
void check_condition(const at::Tensor& condition) {
  TORCH_CHECK(condition.scalar_type() == c10::kBool || condition.scalar_type() == c10::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ",
              condition.scalar_type());
}
const Math kWhere = [](Builder& b, const std::vector<Value>& v) {
  return b.select(v[0], v[1], v[2]);
};

// ---- clamp ----
Math clamp_math(bool has_min, bool has_max) {
  return [has_min, has_max](Builder& b, const std::vector<Value>& v) {
    Value x = v[0];
    if (has_min) x = b.binary("maximum", x, v[1]);
    if (has_max) x = b.binary("minimum", x, v[2]);
    return x;
  };
}

void check_clamp(const Arg& min, const Arg& max) {
  TORCH_CHECK(min.present() || max.present(),
              "torch.clamp: At least one of 'min' or 'max' must not be None");
}

// The promoted dtype of a clamp; complex numbers have no order to clamp by.
c10::ScalarType clamp_type(const std::vector<Arg>& args) {
  c10::ScalarType type = promote(args);
  // The CPU reports a shape mismatch before refusing complex numbers (the result's shape is
  // computed later anyway, so only this error path computes it here).
  if (c10::isComplexType(type)) broadcast_shape(args);
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(type),
                              "clamp is not supported for complex types");
  return type;
}

// ---- lerp ----
Math lerp_math() {
  return [](Builder& b, const std::vector<Value>& v) { return lerp(b, v[0], v[1], v[2]); };
}
void check_lerp(const at::Tensor& self, const at::Tensor& end, const at::Tensor* weight) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  if (weight != nullptr) {
    TORCH_CHECK(self.scalar_type() == weight->scalar_type(), "expected dtype ", self.scalar_type(),
                " for `weight` but got dtype ", weight->scalar_type());
  }
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"lerp_kernel_scalar\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
}

// ---- addcmul / addcdiv ----
Math addc_math(bool divide) {
  return [divide](Builder& b, const std::vector<Value>& v) {
    Value prod = b.binary(divide ? "divide" : "multiply", v[1], v[2]);
    return b.binary("add", v[0], b.binary("multiply", v[3], prod));
  };
}
void check_addcdiv(const at::Tensor& t1, const at::Tensor& t2) {
  TORCH_CHECK(
      !(c10::isIntegralType(t1.scalar_type(), true) && c10::isIntegralType(t2.scalar_type(), true)),
      "Integer division with addcdiv is no longer supported, and in a future release "
      "addcdiv will perform a true division of tensor1 and tensor2. The historic "
      "addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / "
      "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
      "tensor2) for float inputs. The future addcdiv behavior is just the latter "
      "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
}

}  // namespace

at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self,
                      const at::Tensor& other) {
  check_condition(condition);
  c10::ScalarType type = at::result_type(self, other);
  return run_functional("aten::where.self", {T(condition), T(self), T(other)}, type, type, kWhere,
                        0);
}
at::Tensor& where_self_out(const at::Tensor& condition, const at::Tensor& self,
                           const at::Tensor& other, at::Tensor& out) {
  check_condition(condition);
  c10::ScalarType type = at::result_type(self, other);
  return run_out("aten::where.self_out", {T(condition), T(self), T(other)}, type, type, kWhere, out,
                 0);
}

namespace {
at::Tensor& masked_fill_impl(const char* name, at::Tensor& self, const at::Tensor& mask,
                             const Arg& value) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool,
              "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), "The size of the mask (",
              mask.sizes(), ") must be expandable to the size of self (", self.sizes(), ")");
  at::assert_no_internal_overlap(self);
  const c10::ScalarType type = self.scalar_type();
  lower(
      name, {T(self), T(mask), value}, type,
      [](Builder& b, const std::vector<Value>& v) { return b.select(v[1], v[2], v[0]); }, self, 1);
  return self;
}
void check_fill_value(const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
}
}  // namespace

at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask,
                                const c10::Scalar& value) {
  return masked_fill_impl("aten::masked_fill_.Scalar", self, mask, S(value));
}
at::Tensor& masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  check_fill_value(value);
  return masked_fill_impl("aten::masked_fill_.Tensor", self, mask, T(value));
}
at::Tensor masked_fill_scalar(const at::Tensor& self, const at::Tensor& mask,
                              const c10::Scalar& value) {
  at::Tensor out = at::empty(at::infer_size(self.sizes(), mask.sizes()), self.options());
  out.copy_(self.expand(out.sizes()));
  return masked_fill_impl("aten::masked_fill.Scalar", out, mask, S(value));
}
at::Tensor masked_fill_tensor(const at::Tensor& self, const at::Tensor& mask,
                              const at::Tensor& value) {
  check_fill_value(value);
  at::Tensor out = at::empty(at::infer_size(self.sizes(), mask.sizes()), self.options());
  out.copy_(self.expand(out.sizes()));
  return masked_fill_impl("aten::masked_fill.Tensor", out, mask, T(value));
}

// clamp, clamp_min and clamp_max: min/max are Scalars or tensors (the .Tensor overloads).
at::Tensor clamp(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                 const std::optional<c10::Scalar>& max) {
  std::vector<Arg> args{T(self), S(min), S(max)};
  check_clamp(args[1], args[2]);
  c10::ScalarType type = clamp_type(args);
  return run_functional("aten::clamp", args, type, type,
                        clamp_math(min.has_value(), max.has_value()));
}
at::Tensor& clamp_out(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                      const std::optional<c10::Scalar>& max, at::Tensor& out) {
  std::vector<Arg> args{T(self), S(min), S(max)};
  check_clamp(args[1], args[2]);
  c10::ScalarType type = clamp_type(args);
  return run_out("aten::clamp.out", args, type, type, clamp_math(min.has_value(), max.has_value()),
                 out);
}
at::Tensor& clamp_(at::Tensor& self, const std::optional<c10::Scalar>& min,
                   const std::optional<c10::Scalar>& max) {
  std::vector<Arg> args{T(self), S(min), S(max)};
  check_clamp(args[1], args[2]);
  c10::ScalarType type = clamp_type(args);
  return run_in_place("aten::clamp_", self, args, type, type,
                      clamp_math(min.has_value(), max.has_value()));
}
at::Tensor clamp_tensor(const at::Tensor& self, const std::optional<at::Tensor>& min,
                        const std::optional<at::Tensor>& max) {
  std::vector<Arg> args{T(self), OT(min), OT(max)};
  check_clamp(args[1], args[2]);
  c10::ScalarType type = clamp_type(args);
  return run_functional("aten::clamp.Tensor", args, type, type,
                        clamp_math(args[1].present(), args[2].present()));
}
at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& out) {
  std::vector<Arg> args{T(self), OT(min), OT(max)};
  check_clamp(args[1], args[2]);
  c10::ScalarType type = clamp_type(args);
  return run_out("aten::clamp.Tensor_out", args, type, type,
                 clamp_math(args[1].present(), args[2].present()), out);
}
at::Tensor& clamp_tensor_(at::Tensor& self, const std::optional<at::Tensor>& min,
                          const std::optional<at::Tensor>& max) {
  std::vector<Arg> args{T(self), OT(min), OT(max)};
  check_clamp(args[1], args[2]);
  c10::ScalarType type = clamp_type(args);
  return run_in_place("aten::clamp_.Tensor", self, args, type, type,
                      clamp_math(args[1].present(), args[2].present()));
}

#define TPU_CLAMP_SIDE(fn, aten, has_min, has_max, ARG, ArgType)                                  \
  at::Tensor fn(const at::Tensor& self, ArgType bound) {                                          \
    std::vector<Arg> args{T(self), has_min ? ARG(bound) : Arg{}, has_max ? ARG(bound) : Arg{}};   \
    c10::ScalarType type = clamp_type(args);                                                      \
    return run_functional("aten::" aten, args, type, type, clamp_math(has_min, has_max));         \
  }                                                                                               \
  at::Tensor& fn##_out(const at::Tensor& self, ArgType bound, at::Tensor& out) {                  \
    std::vector<Arg> args{T(self), has_min ? ARG(bound) : Arg{}, has_max ? ARG(bound) : Arg{}};   \
    c10::ScalarType type = clamp_type(args);                                                      \
    return run_out("aten::" aten "_out", args, type, type, clamp_math(has_min, has_max), out);    \
  }                                                                                               \
  at::Tensor& fn##_(at::Tensor& self, ArgType bound) {                                            \
    std::vector<Arg> args{T(self), has_min ? ARG(bound) : Arg{}, has_max ? ARG(bound) : Arg{}};   \
    c10::ScalarType type = clamp_type(args);                                                      \
    return run_in_place("aten::" aten "_", self, args, type, type, clamp_math(has_min, has_max)); \
  }
TPU_CLAMP_SIDE(clamp_min, "clamp_min", true, false, S, const c10::Scalar&)
TPU_CLAMP_SIDE(clamp_max, "clamp_max", false, true, S, const c10::Scalar&)
TPU_CLAMP_SIDE(clamp_min_tensor, "clamp_min.Tensor", true, false, T, const at::Tensor&)
TPU_CLAMP_SIDE(clamp_max_tensor, "clamp_max.Tensor", false, true, T, const at::Tensor&)
#undef TPU_CLAMP_SIDE

// lerp: weight is a Scalar or a tensor; computed in opmath and rounded once.
at::Tensor lerp_scalar(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight) {
  check_lerp(self, end, nullptr);
  c10::ScalarType type = self.scalar_type();
  return run_functional("aten::lerp.Scalar", {T(self), T(end), S(weight)}, type, opmath_type(type),
                        lerp_math());
}
at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end,
                            const c10::Scalar& weight, at::Tensor& out) {
  check_lerp(self, end, nullptr);
  c10::ScalarType type = self.scalar_type();
  return run_out("aten::lerp.Scalar_out", {T(self), T(end), S(weight)}, type, opmath_type(type),
                 lerp_math(), out);
}
at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight) {
  check_lerp(self, end, nullptr);
  c10::ScalarType type = self.scalar_type();
  return run_in_place("aten::lerp_.Scalar", self, {T(self), T(end), S(weight)}, type,
                      opmath_type(type), lerp_math());
}
at::Tensor lerp_tensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  check_lerp(self, end, &weight);
  c10::ScalarType type = self.scalar_type();
  return run_functional("aten::lerp.Tensor", {T(self), T(end), T(weight)}, type, opmath_type(type),
                        lerp_math());
}
at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight,
                            at::Tensor& out) {
  check_lerp(self, end, &weight);
  c10::ScalarType type = self.scalar_type();
  return run_out("aten::lerp.Tensor_out", {T(self), T(end), T(weight)}, type, opmath_type(type),
                 lerp_math(), out);
}
at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  check_lerp(self, end, &weight);
  c10::ScalarType type = self.scalar_type();
  return run_in_place("aten::lerp_.Tensor", self, {T(self), T(end), T(weight)}, type,
                      opmath_type(type), lerp_math());
}

#define TPU_ADDC(fn, aten, divide)                                                               \
  at::Tensor fn(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,              \
                const c10::Scalar& value) {                                                      \
    if (divide) check_addcdiv(t1, t2);                                                           \
    std::vector<Arg> args{T(self), T(t1), T(t2), S(value)};                                      \
    c10::ScalarType type = promote({T(self), T(t1), T(t2)});                                     \
    return run_functional("aten::" aten, args, type, opmath_type(type), addc_math(divide));      \
  }                                                                                              \
  at::Tensor& fn##_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,       \
                       const c10::Scalar& value, at::Tensor& out) {                              \
    if (divide) check_addcdiv(t1, t2);                                                           \
    std::vector<Arg> args{T(self), T(t1), T(t2), S(value)};                                      \
    c10::ScalarType type = promote({T(self), T(t1), T(t2)});                                     \
    return run_out("aten::" aten ".out", args, type, opmath_type(type), addc_math(divide), out); \
  }                                                                                              \
  at::Tensor& fn##_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,                \
                    const c10::Scalar& value) {                                                  \
    if (divide) check_addcdiv(t1, t2);                                                           \
    std::vector<Arg> args{T(self), T(t1), T(t2), S(value)};                                      \
    c10::ScalarType type = promote({T(self), T(t1), T(t2)});                                     \
    return run_in_place("aten::" aten "_", self, args, type, opmath_type(type),                  \
                        addc_math(divide));                                                      \
  }
TPU_ADDC(addcmul, "addcmul", false)
TPU_ADDC(addcdiv, "addcdiv", true)
#undef TPU_ADDC

at::Tensor isnan(const at::Tensor& self) {
  c10::ScalarType type = self.scalar_type();
  return run_functional("aten::isnan", {T(self)}, c10::kBool, type,
                        [](Builder& b, const std::vector<Value>& v) {
                          return b.compare(Compare::NE, v[0], v[0]);  // false for integers
                        });
}

namespace {
Math nan_to_num_math(c10::ScalarType type) {
  return [type](Builder& b, const std::vector<Value>& v) {
    const Value& x = v[0];
    if (!c10::isFloatingType(type)) return x;
    Value r = b.select(b.compare(Compare::NE, x, x), v[1], x);
    Value inf = splat(b, std::numeric_limits<double>::infinity(), x);
    r = b.select(b.compare(Compare::EQ, x, inf), v[2], r);
    return b.select(b.compare(Compare::EQ, x, b.unary("negate", inf)), v[3], r);
  };
}
std::vector<Arg> nan_to_num_args(const at::Tensor& self, std::optional<double> nan,
                                 std::optional<double> posinf, std::optional<double> neginf) {
  double big = 0, low = 0;
  switch (self.scalar_type()) {
    case c10::kHalf:
      big = std::numeric_limits<c10::Half>::max();
      low = std::numeric_limits<c10::Half>::lowest();
      break;
    case c10::kBFloat16:
      big = std::numeric_limits<c10::BFloat16>::max();
      low = std::numeric_limits<c10::BFloat16>::lowest();
      break;
    case c10::kFloat:
      big = std::numeric_limits<float>::max();
      low = std::numeric_limits<float>::lowest();
      break;
    default: big = std::numeric_limits<double>::max(); low = std::numeric_limits<double>::lowest();
  }
  if (!c10::isFloatingType(self.scalar_type())) return {T(self), Arg{}, Arg{}, Arg{}};
  return {T(self), S(c10::Scalar(nan.value_or(0.0))), S(c10::Scalar(posinf.value_or(big))),
          S(c10::Scalar(neginf.value_or(low)))};
}
}  // namespace

at::Tensor nan_to_num(const at::Tensor& self, std::optional<double> nan,
                      std::optional<double> posinf, std::optional<double> neginf) {
  c10::ScalarType type = self.scalar_type();
  return run_functional("aten::nan_to_num", nan_to_num_args(self, nan, posinf, neginf), type, type,
                        nan_to_num_math(type));
}
at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan,
                           std::optional<double> posinf, std::optional<double> neginf,
                           at::Tensor& out) {
  c10::ScalarType type = self.scalar_type();
  TORCH_CHECK(out.scalar_type() == type, "nan_to_num: dtype of out: ", out.scalar_type(),
              " should be same as input: ", type);
  return run_out("aten::nan_to_num.out", nan_to_num_args(self, nan, posinf, neginf), type, type,
                 nan_to_num_math(type), out);
}
at::Tensor& nan_to_num_(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf) {
  c10::ScalarType type = self.scalar_type();
  return run_in_place("aten::nan_to_num_", self, nan_to_num_args(self, nan, posinf, neginf), type,
                      type, nan_to_num_math(type));
}

}  // namespace tpu::aten
