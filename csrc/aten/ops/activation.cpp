// Activation functions and their backward: gelu, silu, softplus, leaky_relu, elu, hardtanh,
// hardswish, hardsigmoid, and the backward of sigmoid and tanh.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Activation.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsub.h>

#include <cmath>
#include <functional>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"
#include "hlo/arithmetic.h"
#include "hlo/log1p.h"

namespace tpu::aten {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::Value;

// The elementwise math of one op: `in` are the tensor operands and `s` the scalar
// operands, all broadcast to the result shape and converted to the compute type.
using Math =
    std::function<Value(Builder&, const std::vector<Value>& in, const std::vector<Value>& s)>;

using hlo::add;
using hlo::div;
using hlo::mul;
using hlo::splat;
using hlo::sub;

// The dtypes an activation takes, as the CPU kernel dispatches them: floating types (most),
// any type (integral ones too), or floating and complex types (silu).
enum Accepts : int { kFloating = 0, kAnyType = 1, kFloatingOrComplex = 2 };

void check_type(const char* name, c10::ScalarType type, int accepts = kFloating) {
  if (accepts == kAnyType) return;
  bool ok =
      c10::isFloatingType(type) || (accepts == kFloatingOrComplex && c10::isComplexType(type));
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", name, "\" not implemented for '", c10::toString(type), "'");
}

constexpr size_t kMaxInputs = 2;
constexpr size_t kMaxScalars = 3;  // elu's alpha, scale and input_scale

// Lowers `math` over `inputs` (broadcast together) into `out`, computing in out's opmath type.
// `math` is fixed by the op's name and `variant` (gelu's approximation, say), so an equal
// call is prepared (see prepared_op.h).
void lower(const char* name, const std::vector<const at::Tensor*>& inputs,
           const std::vector<c10::Scalar>& scalars, const Math& math, const at::Tensor& out,
           int64_t variant = 0) {
  for (const at::Tensor* t : inputs) at::assert_no_partial_overlap(out, *t);
  const c10::ScalarType compute = opmath_type(out.scalar_type());
  std::vector<int64_t> shape = out.sizes().vec();
  TORCH_INTERNAL_ASSERT(inputs.size() <= kMaxInputs && scalars.size() <= kMaxScalars);
  auto input_at = [&](size_t i) { return i < inputs.size() ? inputs[i] : nullptr; };
  auto scalar_at = [&](size_t i) { return i < scalars.size() ? &scalars[i] : nullptr; };
  PreparedCall call(name, {input_at(0), input_at(1), &out},
                    {scalar_at(0), scalar_at(1), scalar_at(2)},
                    {variant, static_cast<int64_t>(compute)});
  if (call.run()) return;
  Program p(name, &call);
  auto& b = p.b();
  std::vector<Value> in, s;
  for (const at::Tensor* t : inputs) in.push_back(b.broadcast_to(p.read(*t, compute), shape));
  for (const c10::Scalar& v : scalars) s.push_back(b.broadcast_to(p.scalar(v, compute), shape));
  p.write(out, math(b, in, s));
  p.run();
}

at::Tensor functional(const char* name, const at::Tensor& self,
                      const std::vector<c10::Scalar>& scalars, const Math& math,
                      int accepts = kFloating, int64_t variant = 0) {
  check_type(name, self.scalar_type(), accepts);
  at::Tensor out = at::empty(self.sizes(), self.options());
  lower(name, {&self}, scalars, math, out, variant);
  return out;
}

at::Tensor& in_place(const char* name, at::Tensor& self, const std::vector<c10::Scalar>& scalars,
                     const Math& math, int accepts = kFloating, int64_t variant = 0) {
  check_type(name, self.scalar_type(), accepts);
  at::assert_no_internal_overlap(self);
  lower(name, {&self}, scalars, math, self, variant);
  return self;
}

at::Tensor& out_variant(const char* name, const at::Tensor& self,
                        const std::vector<c10::Scalar>& scalars, const Math& math, at::Tensor& out,
                        int accepts = kFloating, int64_t variant = 0) {
  check_type(name, self.scalar_type(), accepts);
  TORCH_CHECK(at::canCast(self.scalar_type(), out.scalar_type()), "result type ",
              self.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, self.sizes());
  at::assert_no_internal_overlap(out);
  lower(name, {&self}, scalars, math, out, variant);
  return out;
}

// A backward op: math(grad_output, x) with the promoted dtype and broadcast shape.
at::Tensor backward(const char* name, const at::Tensor& grad, const at::Tensor& x,
                    const std::vector<c10::Scalar>& scalars, const Math& math, int64_t variant = 0,
                    int accepts = kFloating) {
  c10::ScalarType type = at::result_type(grad, x);
  check_type(name, type, accepts);
  at::Tensor out = at::empty(at::infer_size(grad.sizes(), x.sizes()), grad.options().dtype(type));
  lower(name, {&grad, &x}, scalars, math, out, variant);
  return out;
}

// ---- the math of each op ----

Math gelu_math(c10::string_view approximate) {
  if (at::native::get_gelutype_enum(approximate) == at::native::GeluType::Tanh) {
    return [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
      const Value& x = in[0];
      Value cube = mul(b, mul(b, x, x), x);
      Value inner = mul(b, splat(b, M_SQRT2 * M_2_SQRTPI * 0.5, x),
                        add(b, x, mul(b, splat(b, 0.044715, x), cube)));
      return mul(b, mul(b, splat(b, 0.5, x), x), add(b, splat(b, 1, x), b.unary("tanh", inner)));
    };
  }
  return [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
    const Value& x = in[0];
    Value cdf = add(b, splat(b, 1, x), unary::erf(b, mul(b, x, splat(b, M_SQRT1_2, x))));
    return mul(b, mul(b, x, splat(b, 0.5, x)), cdf);
  };
}

Math gelu_backward_math(c10::string_view approximate) {
  if (at::native::get_gelutype_enum(approximate) == at::native::GeluType::Tanh) {
    return [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
      const Value &g = in[0], &x = in[1];
      const double beta = M_SQRT2 * M_2_SQRTPI * 0.5, kappa = 0.044715;
      Value sq = mul(b, x, x);
      Value inner = mul(b, splat(b, beta, x), add(b, x, mul(b, splat(b, kappa, x), mul(b, sq, x))));
      Value t = b.unary("tanh", inner);
      Value left = mul(b, splat(b, 0.5, x), x);
      Value right = add(b, splat(b, 1, x), t);
      Value left_d = mul(b, splat(b, 0.5, x), right);
      Value right_d = sub(b, splat(b, 1, x), mul(b, t, t));
      Value inner_d =
          mul(b, splat(b, beta, x), add(b, splat(b, 1, x), mul(b, splat(b, 3 * kappa, x), sq)));
      return mul(b, g, add(b, left_d, mul(b, mul(b, left, right_d), inner_d)));
    };
  }
  return [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
    const Value &g = in[0], &x = in[1];
    Value cdf = mul(b, splat(b, 0.5, x),
                    add(b, splat(b, 1, x), unary::erf(b, mul(b, x, splat(b, M_SQRT1_2, x)))));
    Value pdf = mul(b, b.unary("exponential", mul(b, splat(b, -0.5, x), mul(b, x, x))),
                    splat(b, M_2_SQRTPI * M_SQRT1_2 * 0.5, x));
    return mul(b, g, add(b, cdf, mul(b, x, pdf)));
  };
}

Value silu_of(Builder& b, const Value& x) {
  return div(b, x, add(b, splat(b, 1, x), b.unary("exponential", b.unary("negate", x))));
}
Value silu_backward_of(Builder& b, const Value& g, const Value& x) {
  Value s =
      div(b, splat(b, 1, x), add(b, splat(b, 1, x), b.unary("exponential", b.unary("negate", x))));
  return mul(b, mul(b, g, s), add(b, splat(b, 1, x), mul(b, x, sub(b, splat(b, 1, x), s))));
}

// scalars: beta, threshold
Value softplus_of(Builder& b, const Value& x, const Value& beta, const Value& threshold) {
  Value xb = mul(b, x, beta);
  Value soft = div(b, hlo::log_plus_one(b, b.unary("exponential", xb)), beta);
  return b.select(b.compare(Compare::GT, xb, threshold), x, soft);
}
Value softplus_backward_of(Builder& b, const Value& g, const Value& x, const Value& beta,
                           const Value& threshold) {
  Value xb = mul(b, x, beta);
  Value z = b.unary("exponential", xb);
  return b.select(b.compare(Compare::GT, xb, threshold), g,
                  div(b, mul(b, g, z), add(b, z, splat(b, 1, x))));
}

// scalars: alpha, scale, input_scale
Value elu_of(Builder& b, const Value& x, const std::vector<Value>& s) {
  Value neg = mul(b, b.unary("exponential_minus_one", mul(b, x, s[2])), mul(b, s[0], s[1]));
  return b.select(b.compare(Compare::LE, x, splat(b, 0, x)), neg, mul(b, x, s[1]));
}

Value clamp_between(Builder& b, const Value& x, const Value& low, const Value& high) {
  return b.binary("minimum", b.binary("maximum", x, low), high);
}

}  // namespace

// ---- registered kernels ----

#define TPU_ACTIVATION_TRIPLE(fn, aten, scalars_decl, scalars, math, integral)    \
  at::Tensor fn(const at::Tensor& self scalars_decl) {                            \
    return functional("aten::" aten, self, scalars, math, integral);              \
  }                                                                               \
  at::Tensor& fn##_(at::Tensor& self scalars_decl) {                              \
    return in_place("aten::" aten "_", self, scalars, math, integral);            \
  }                                                                               \
  at::Tensor& fn##_out(const at::Tensor& self scalars_decl, at::Tensor& out) {    \
    return out_variant("aten::" aten ".out", self, scalars, math, out, integral); \
  }
#define TPU_COMMA ,

namespace {
const Math kSilu = [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
  return silu_of(b, in[0]);
};
const Math kSoftplus = [](Builder& b, const std::vector<Value>& in, const std::vector<Value>& s) {
  return softplus_of(b, in[0], s[0], s[1]);
};
const Math kLeakyRelu = [](Builder& b, const std::vector<Value>& in, const std::vector<Value>& s) {
  const Value& x = in[0];
  return b.select(b.compare(Compare::GT, x, splat(b, 0, x)), x, mul(b, x, s[0]));
};
const Math kElu = [](Builder& b, const std::vector<Value>& in, const std::vector<Value>& s) {
  return elu_of(b, in[0], s);
};
const Math kHardtanh = [](Builder& b, const std::vector<Value>& in, const std::vector<Value>& s) {
  return clamp_between(b, in[0], s[0], s[1]);
};
const Math kHardswish = [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
  const Value& x = in[0];
  Value r = clamp_between(b, add(b, x, splat(b, 3, x)), splat(b, 0, x), splat(b, 6, x));
  return div(b, mul(b, x, r), splat(b, 6, x));
};
const Math kHardsigmoid = [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
  const Value& x = in[0];
  Value r = clamp_between(b, add(b, x, splat(b, 3, x)), splat(b, 0, x), splat(b, 6, x));
  return div(b, r, splat(b, 6, x));
};
}  // namespace

namespace {
int64_t gelu_variant(c10::string_view approximate) {
  return static_cast<int64_t>(at::native::get_gelutype_enum(approximate));
}
}  // namespace

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  return functional("aten::gelu", self, {}, gelu_math(approximate), false,
                    gelu_variant(approximate));
}
at::Tensor& gelu_(at::Tensor& self, c10::string_view approximate) {
  return in_place("aten::gelu_", self, {}, gelu_math(approximate), false,
                  gelu_variant(approximate));
}
at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  return out_variant("aten::gelu.out", self, {}, gelu_math(approximate), out, false,
                     gelu_variant(approximate));
}
at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self,
                         c10::string_view approximate) {
  return backward("aten::gelu_backward", grad, self, {}, gelu_backward_math(approximate),
                  gelu_variant(approximate));
}

TPU_ACTIVATION_TRIPLE(silu, "silu", , {}, kSilu, kFloatingOrComplex)
at::Tensor silu_backward(const at::Tensor& grad, const at::Tensor& self) {
  return backward(
      "aten::silu_backward", grad, self, {},
      [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
        return silu_backward_of(b, in[0], in[1]);
      },
      0, kFloatingOrComplex);
}

at::Tensor softplus(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold) {
  return functional("aten::softplus", self, {beta, threshold}, kSoftplus);
}
at::Tensor& softplus_out(const at::Tensor& self, const c10::Scalar& beta,
                         const c10::Scalar& threshold, at::Tensor& out) {
  return out_variant("aten::softplus.out", self, {beta, threshold}, kSoftplus, out);
}
at::Tensor softplus_backward(const at::Tensor& grad, const at::Tensor& self,
                             const c10::Scalar& beta, const c10::Scalar& threshold) {
  return backward("aten::softplus_backward", grad, self, {beta, threshold},
                  [](Builder& b, const std::vector<Value>& in, const std::vector<Value>& s) {
                    return softplus_backward_of(b, in[0], in[1], s[0], s[1]);
                  });
}

TPU_ACTIVATION_TRIPLE(leaky_relu, "leaky_relu", TPU_COMMA const c10::Scalar& slope, {slope},
                      kLeakyRelu, false)
at::Tensor leaky_relu_backward(const at::Tensor& grad, const at::Tensor& self,
                               const c10::Scalar& slope, bool self_is_result) {
  TORCH_CHECK(!self_is_result || slope.to<double>() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which "
              "is not supported. This is caused by calling in-place forward function with a "
              "negative slope, please call out-of-place version instead. File an issue at "
              "https://github.com/pytorch/pytorch if you do require supporting in-place leakRelu "
              "backward calculation with negative slope");
  return backward("aten::leaky_relu_backward", grad, self, {slope},
                  [](Builder& b, const std::vector<Value>& in, const std::vector<Value>& s) {
                    const Value &g = in[0], &x = in[1];
                    return b.select(b.compare(Compare::GT, x, splat(b, 0, x)), g, mul(b, g, s[0]));
                  });
}

TPU_ACTIVATION_TRIPLE(elu, "elu",
                      TPU_COMMA const c10::Scalar& alpha TPU_COMMA const c10::Scalar& scale
                          TPU_COMMA const c10::Scalar& input_scale,
                      (std::vector<c10::Scalar>{alpha, scale, input_scale}), kElu, false)
at::Tensor elu_backward(const at::Tensor& grad, const c10::Scalar& alpha, const c10::Scalar& scale,
                        const c10::Scalar& input_scale, bool is_result,
                        const at::Tensor& self_or_result) {
  TORCH_CHECK(!is_result || alpha.to<double>() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not "
              "supported. This is caused by calling in-place forward function with a negative "
              "slope, please call out-of-place version instead.");
  Math math = [is_result](Builder& b, const std::vector<Value>& in, const std::vector<Value>& s) {
    const Value &g = in[0], &x = in[1];
    Value negcoef = mul(b, s[0], s[1]);
    Value neg = is_result ? mul(b, mul(b, g, s[2]), add(b, x, negcoef))
                          : mul(b, mul(b, mul(b, g, s[2]), negcoef),
                                b.unary("exponential", mul(b, x, s[2])));
    return b.select(b.compare(Compare::LE, x, splat(b, 0, x)), neg, mul(b, g, s[1]));
  };
  return backward("aten::elu_backward", grad, self_or_result, {alpha, scale, input_scale}, math,
                  is_result);
}

namespace {
void check_hardtanh(const at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max) {
  TORCH_CHECK(self.scalar_type() != c10::kBool, "Bool inputs not supported for hardtanh");
  TORCH_CHECK(min.to<double>() <= max.to<double>(), "hardtanh: min_val (", min,
              ") must be less than or equal to max_val (", max, ")");
}
}  // namespace

at::Tensor hardtanh(const at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max) {
  check_hardtanh(self, min, max);
  return functional("aten::hardtanh", self, {min, max}, kHardtanh, true);
}
at::Tensor& hardtanh_(at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max) {
  check_hardtanh(self, min, max);
  return in_place("aten::hardtanh_", self, {min, max}, kHardtanh, true);
}
at::Tensor& hardtanh_out(const at::Tensor& self, const c10::Scalar& min, const c10::Scalar& max,
                         at::Tensor& out) {
  check_hardtanh(self, min, max);
  return out_variant("aten::hardtanh.out", self, {min, max}, kHardtanh, out, true);
}
at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& min,
                             const c10::Scalar& max) {
  return backward("aten::hardtanh_backward", grad, self, {min, max},
                  [](Builder& b, const std::vector<Value>& in, const std::vector<Value>& s) {
                    const Value &g = in[0], &x = in[1];
                    Value outside = b.binary("or", b.compare(Compare::LE, x, s[0]),
                                             b.compare(Compare::GE, x, s[1]));
                    return b.select(outside, splat(b, 0, x), g);
                  });
}

TPU_ACTIVATION_TRIPLE(hardswish, "hardswish", , {}, kHardswish, false)
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& self) {
  return backward("aten::hardswish_backward", grad, self, {},
                  [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
                    const Value &g = in[0], &x = in[1];
                    Value mid = mul(b, g, add(b, div(b, x, splat(b, 3, x)), splat(b, 0.5, x)));
                    Value upper = b.select(b.compare(Compare::LE, x, splat(b, 3, x)), mid, g);
                    return b.select(b.compare(Compare::LT, x, splat(b, -3, x)), splat(b, 0, x),
                                    upper);
                  });
}

TPU_ACTIVATION_TRIPLE(hardsigmoid, "hardsigmoid", , {}, kHardsigmoid, false)
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& self) {
  return backward("aten::hardsigmoid_backward", grad, self, {},
                  [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
                    const Value &g = in[0], &x = in[1];
                    Value inside = b.binary("and", b.compare(Compare::GT, x, splat(b, -3, x)),
                                            b.compare(Compare::LT, x, splat(b, 3, x)));
                    return b.select(inside, div(b, g, splat(b, 6, x)), splat(b, 0, x));
                  });
}

// Complex gradients (the conjugate of the derivative, as PyTorch's complex autograd takes
// it) are composed of complex ops.
at::Tensor sigmoid_backward(const at::Tensor& grad, const at::Tensor& output) {
  if (grad.is_complex() || output.is_complex()) {
    return at::mul(grad, at::mul(output, at::rsub(output, 1)).conj());
  }
  return backward("aten::sigmoid_backward", grad, output, {},
                  [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
                    const Value &g = in[0], &y = in[1];
                    return mul(b, mul(b, g, sub(b, splat(b, 1, y), y)), y);
                  });
}

at::Tensor tanh_backward(const at::Tensor& grad, const at::Tensor& output) {
  if (grad.is_complex() || output.is_complex()) {
    return at::mul(grad, at::rsub(at::mul(output, output), 1).conj());
  }
  return backward("aten::tanh_backward", grad, output, {},
                  [](Builder& b, const std::vector<Value>& in, const std::vector<Value>&) {
                    const Value &g = in[0], &y = in[1];
                    return mul(b, g, sub(b, splat(b, 1, y), mul(b, y, y)));
                  });
}

#undef TPU_ACTIVATION_TRIPLE
#undef TPU_COMMA

}  // namespace tpu::aten
