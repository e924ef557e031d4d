#pragma once
// Binary elementwise ops from one table (kinds of dtype rules and overload sets).
// Implemented in binary.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

// binary.cpp: (aten name, kind, overloads). Kinds: Common computes and returns the
// promoted dtype (Numeric: and rejects bool); Compare/Logical return bool; Float promotes integers
// to float; FloatOnly rejects integer, bool and complex dtypes (FloatOrComplex integer, bool and
// complex32, as the CPU's kernel does); Integral rejects floating dtypes. Overload
// sets: TS = .Tensor/.Scalar (+ _out and in-place), T = Tensor only (name, name.out, name_),
// TO = T without the in-place form.
enum class BinaryKind {
  Common,
  Numeric,
  Compare,
  Logical,
  Float,
  FloatOnly,
  FloatOrComplex,
  Integral
};
// clang-format off
#define TPU_BINARY_OPS(_) \
  _(eq, Compare, TS) _(ne, Compare, TS) _(lt, Compare, TS) _(le, Compare, TS) \
  _(gt, Compare, TS) _(ge, Compare, TS) _(fmod, Numeric, TS) _(remainder, Numeric, TS) \
  _(bitwise_and, Integral, TS) _(bitwise_or, Integral, TS) _(bitwise_xor, Integral, TS) \
  _(maximum, Common, T) _(minimum, Common, T) _(atan2, Float, T) \
  _(logical_and, Logical, T) _(logical_or, Logical, T) _(logical_xor, Logical, T) \
  _(logaddexp, FloatOrComplex, TO) _(logaddexp2, FloatOnly, TO) _(fmax, Common, TO) \
  _(fmin, Common, TO) _(hypot, FloatOnly, T) _(copysign, Float, none) \
  _(nextafter, FloatOnly, T) _(xlog1py, Float, none)
// clang-format on

using BinaryLowering = hlo::Value (*)(hlo::Builder&, const hlo::Value&, const hlo::Value&);
namespace binary {
#define TPU_DECLARE_BINARY_LOWERING(name, kind, overloads) \
  hlo::Value name(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y);
TPU_BINARY_OPS(TPU_DECLARE_BINARY_LOWERING)
#undef TPU_DECLARE_BINARY_LOWERING
hlo::Value pow(hlo::Builder& b, const hlo::Value& x, const hlo::Value& y);
}  // namespace binary

// One side of a binary op: a tensor (tpu, or a CPU scalar tensor) or a Scalar.
struct BinaryOperand {
  const at::Tensor* tensor = nullptr;
  const c10::Scalar* scalar = nullptr;
};
at::Tensor binary_functional(const char* name, BinaryLowering lowering, BinaryKind kind,
                             const BinaryOperand& self, const BinaryOperand& other);
at::Tensor& binary_in_place(const char* name, BinaryLowering lowering, BinaryKind kind,
                            at::Tensor& self, const BinaryOperand& other);
at::Tensor& binary_out(const char* name, BinaryLowering lowering, BinaryKind kind,
                       const BinaryOperand& self, const BinaryOperand& other, at::Tensor& out);
// div with rounding_mode None (true division), "floor" or "trunc"
at::Tensor div_mode(const at::Tensor& self, const at::Tensor& other,
                    std::optional<c10::string_view> mode);
at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other,
                      std::optional<c10::string_view> mode);
at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other,
                         std::optional<c10::string_view> mode, at::Tensor& out);
at::Tensor floor_divide(const at::Tensor& self, const at::Tensor& other);
at::Tensor& floor_divide_(at::Tensor& self, const at::Tensor& other);
at::Tensor& floor_divide_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);

}  // namespace tpu::aten
