#pragma once
// Pointwise ops of several operands (addcmul, lerp, where, clamp, ...).
// Implemented in pointwise.cpp.
#include "aten/ops/common.h"

namespace tpu::aten {

at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other);
at::Tensor& where_self_out(const at::Tensor& condition, const at::Tensor& self,
                           const at::Tensor& other, at::Tensor& out);
at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value);
at::Tensor& masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value);
at::Tensor masked_fill_scalar(const at::Tensor& self, const at::Tensor& mask,
                              const c10::Scalar& value);
at::Tensor masked_fill_tensor(const at::Tensor& self, const at::Tensor& mask,
                              const at::Tensor& value);
at::Tensor clamp(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                 const std::optional<c10::Scalar>& max);
at::Tensor& clamp_out(const at::Tensor& self, const std::optional<c10::Scalar>& min,
                      const std::optional<c10::Scalar>& max, at::Tensor& out);
at::Tensor& clamp_(at::Tensor& self, const std::optional<c10::Scalar>& min,
                   const std::optional<c10::Scalar>& max);
at::Tensor clamp_tensor(const at::Tensor& self, const std::optional<at::Tensor>& min,
                        const std::optional<at::Tensor>& max);
at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& out);
at::Tensor& clamp_tensor_(at::Tensor& self, const std::optional<at::Tensor>& min,
                          const std::optional<at::Tensor>& max);
#define TPU_DECLARE_CLAMP_SIDE(fn, ArgType)                                     \
  at::Tensor fn(const at::Tensor& self, ArgType bound);                         \
  at::Tensor& fn##_out(const at::Tensor& self, ArgType bound, at::Tensor& out); \
  at::Tensor& fn##_(at::Tensor& self, ArgType bound);
TPU_DECLARE_CLAMP_SIDE(clamp_min, const c10::Scalar&)
TPU_DECLARE_CLAMP_SIDE(clamp_max, const c10::Scalar&)
TPU_DECLARE_CLAMP_SIDE(clamp_min_tensor, const at::Tensor&)
TPU_DECLARE_CLAMP_SIDE(clamp_max_tensor, const at::Tensor&)
#undef TPU_DECLARE_CLAMP_SIDE
at::Tensor lerp_scalar(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight);
at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end,
                            const c10::Scalar& weight, at::Tensor& out);
at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight);
at::Tensor lerp_tensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight);
at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight,
                            at::Tensor& out);
at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight);
#define TPU_DECLARE_ADDC(fn)                                                               \
  at::Tensor fn(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,        \
                const c10::Scalar& value);                                                 \
  at::Tensor& fn##_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, \
                       const c10::Scalar& value, at::Tensor& out);                         \
  at::Tensor& fn##_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,          \
                    const c10::Scalar& value);
TPU_DECLARE_ADDC(addcmul)
TPU_DECLARE_ADDC(addcdiv)
#undef TPU_DECLARE_ADDC
at::Tensor isnan(const at::Tensor& self);
at::Tensor nan_to_num(const at::Tensor& self, std::optional<double> nan,
                      std::optional<double> posinf, std::optional<double> neginf);
at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan,
                           std::optional<double> posinf, std::optional<double> neginf,
                           at::Tensor& out);
at::Tensor& nan_to_num_(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf);

// pointwise.cpp: lerp's math (also the foreach lerp's)
hlo::Value lerp(hlo::Builder& b, const hlo::Value& start, const hlo::Value& end,
                const hlo::Value& weight);

}  // namespace tpu::aten
