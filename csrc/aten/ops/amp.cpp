// The two kernels torch.amp.GradScaler needs, each one program: unscaling every
// gradient while looking for infinities and NaNs, and the loss-scale update. The
// scale, its growth factors and interval are runtime operands, so a changing scale
// never recompiles. Semantics as PyTorch's CPU and CUDA kernels.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <numeric>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

using hlo::Value;

namespace {

// Whether any element of `x` is an infinity or a NaN, as a pred scalar.
Value any_non_finite(hlo::Builder& b, const Value& x) {
  Value finite = b.op("is_finite", {x}, hlo::TensorType{hlo::ElementType::Pred, x.dims()});
  std::vector<int64_t> all(x.dims().size());
  std::iota(all.begin(), all.end(), 0);
  Value all_finite =
      b.reduce(finite, b.constant(1, hlo::ElementType::Pred), hlo::Reduction::And, all);
  return b.unary("not", all_finite);
}

Value scalar_of(hlo::Builder& b, const Value& one_element) { return b.reshape(one_element, {}); }

}  // namespace

void amp_foreach_non_finite_check_and_unscale_(at::TensorList grads, at::Tensor& found_inf,
                                               const at::Tensor& inv_scale) {
  TORCH_CHECK(inv_scale.numel() == 1, "inv_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(inv_scale.scalar_type() == at::kFloat, "inv_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  if (grads.empty()) return;
  Program p("aten::_amp_foreach_non_finite_check_and_unscale_");
  auto& b = p.b();
  Value scale = scalar_of(b, p.read(inv_scale));
  Value any_bad = b.constant(0, hlo::ElementType::Pred);
  for (const at::Tensor& grad : grads) {
    TORCH_CHECK(grad.layout() == at::kStrided, "one of scaled_grads was not a strided tensor.");
    TORCH_CHECK(at::isFloatingType(grad.scalar_type()),
                "_amp_foreach_non_finite_check_and_unscale_ expects floating-point gradients, "
                "got ",
                grad.scalar_type());
    if (grad.numel() == 0) continue;
    c10::ScalarType compute = opmath_type(grad.scalar_type());
    Value x = p.read(grad, compute);
    any_bad = b.binary("or", any_bad, any_non_finite(b, x));
    Value factor = b.broadcast_to(b.convert(scale, element_type(compute)), x.dims());
    p.write(grad, b.binary("multiply", x, factor));
  }
  Value found = scalar_of(b, p.read(found_inf));
  p.write(found_inf, b.select(any_bad, b.constant(1, hlo::ElementType::F32), found));
  p.run();
}

at::Tensor& amp_update_scale_(at::Tensor& scale, at::Tensor& growth_tracker,
                              const at::Tensor& found_inf, double growth_factor,
                              double backoff_factor, int64_t growth_interval) {
  TORCH_CHECK(growth_tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(scale.numel() == 1, "current_scale must be a 1-element tensor.");
  TORCH_CHECK(found_inf.numel() == 1, "found_inf must be a 1-element tensor.");
  TORCH_CHECK(growth_tracker.scalar_type() == at::kInt, "growth_tracker must be an int tensor.");
  TORCH_CHECK(scale.scalar_type() == at::kFloat, "current_scale must be a float tensor.");
  TORCH_CHECK(found_inf.scalar_type() == at::kFloat, "found_inf must be a float tensor.");
  Program p("aten::_amp_update_scale_");
  auto& b = p.b();
  const auto f32 = hlo::ElementType::F32;
  const auto f64 = hlo::ElementType::F64;
  const auto s32 = hlo::ElementType::S32;
  // The factors multiply in double, as PyTorch's kernels do, then round to float.
  Value current = b.convert(scalar_of(b, p.read(scale)), f64);
  Value tracker = scalar_of(b, p.read(growth_tracker));
  Value inf_found =
      b.compare(hlo::Compare::NE, scalar_of(b, p.read(found_inf)), b.constant(0, f32));
  Value backed_off =
      b.convert(b.binary("multiply", current, p.scalar(backoff_factor, c10::kDouble)), f32);
  Value grown =
      b.convert(b.binary("multiply", current, p.scalar(growth_factor, c10::kDouble)), f32);
  Value successful = b.binary("add", tracker, b.constant(1, s32));
  Value grow_now = b.compare(hlo::Compare::EQ, successful, p.scalar(growth_interval, c10::kInt));
  // Never grow the scale past float32's range to infinity.
  Value grown_finite = b.op("is_finite", {grown}, hlo::TensorType{hlo::ElementType::Pred, {}});
  Value kept = b.convert(current, f32);
  Value unscaled = b.select(b.binary("and", grow_now, grown_finite), grown, kept);
  p.write(scale, b.select(inf_found, backed_off, unscaled));
  Value zero = b.constant(0, s32);
  p.write(growth_tracker, b.select(inf_found, zero, b.select(grow_now, zero, successful)));
  p.run();
  return scale;
}

}  // namespace tpu::aten
