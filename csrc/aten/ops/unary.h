#pragma once
// Unary elementwise ops from one table, and the bool- and integer-only ones.
// Implemented in unary.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

// unary.cpp: (aten name, lowering in namespace unary, computes in float for integer inputs)
// clang-format off
#define TPU_UNARY_OPS(_) \
  _(abs, false) _(neg, false) _(ceil, false) _(floor, false) _(round, false) \
  _(trunc, false) _(sign, false) _(sgn, false) _(exp, true) _(expm1, true) _(log, true) \
  _(log1p, true) _(log2, true) _(log10, true) _(sqrt, true) _(rsqrt, true) \
  _(reciprocal, true) _(sin, true) _(cos, true) _(tan, true) _(tanh, true) \
  _(sigmoid, true) _(atan, true) _(asin, true) _(acos, true) _(sinh, true) _(cosh, true) \
  _(erf, true) _(exp2, true) _(erfc, true) _(atanh, true) _(asinh, true) _(acosh, true) \
  _(sinc, true)
// clang-format on

using UnaryLowering = hlo::Value (*)(hlo::Builder&, const hlo::Value&);
namespace unary {
#define TPU_DECLARE_UNARY_LOWERING(name, float_op) \
  hlo::Value name(hlo::Builder& b, const hlo::Value& x);
TPU_UNARY_OPS(TPU_DECLARE_UNARY_LOWERING)
#undef TPU_DECLARE_UNARY_LOWERING
}  // namespace unary

void lower_unary(const char* name, UnaryLowering lowering, bool float_op, const at::Tensor& self,
                 const at::Tensor& out);
at::Tensor unary_functional(const char* name, UnaryLowering lowering, bool float_op,
                            const at::Tensor& self);
at::Tensor& unary_in_place(const char* name, UnaryLowering lowering, bool float_op,
                           at::Tensor& self);
at::Tensor& unary_out(const char* name, UnaryLowering lowering, bool float_op,
                      const at::Tensor& self, at::Tensor& out);

// ops whose result is bool or that only take integers
at::Tensor isposinf(const at::Tensor& self);
at::Tensor& isposinf_out(const at::Tensor& self, at::Tensor& out);
at::Tensor logical_not(const at::Tensor& self);
at::Tensor& logical_not_(at::Tensor& self);
at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out);
at::Tensor bitwise_not(const at::Tensor& self);
at::Tensor& bitwise_not_(at::Tensor& self);
at::Tensor& bitwise_not_out(const at::Tensor& self, at::Tensor& out);

}  // namespace tpu::aten
