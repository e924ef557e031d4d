// torch.polar(abs, angle) = abs * (cos(angle) + i sin(angle)), as the real and imaginary
// parts of one complex tensor (rotary embeddings build their frequencies with it).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include "aten/ops/all.h"

namespace tpu::aten {

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  auto has_complex_counterpart = [](c10::ScalarType type) {
    return type == c10::kHalf || type == c10::kFloat || type == c10::kDouble;
  };
  TORCH_CHECK(
      has_complex_counterpart(abs.scalar_type()) && has_complex_counterpart(angle.scalar_type()),
      "Expected both inputs to be Half, Float or Double tensors but got ", abs.scalar_type(),
      " and ", angle.scalar_type());
  TORCH_CHECK(abs.scalar_type() == angle.scalar_type(), "Expected object of scalar type ",
              abs.scalar_type(), " but got scalar type ", angle.scalar_type(),
              " for second argument");
  TORCH_CHECK(out.scalar_type() == c10::toComplexType(abs.scalar_type()),
              "Expected object of scalar type ", c10::toComplexType(abs.scalar_type()),
              " but got scalar type ", out.scalar_type(), " for argument 'out'");
  at::Tensor parts = at::stack({abs * at::cos(angle), abs * at::sin(angle)}, -1);
  at::native::resize_output(out, parts.sizes().slice(0, parts.dim() - 1));
  out.copy_(at::view_as_complex(parts));
  return out;
}

}  // namespace tpu::aten
