// torch.polar(abs, angle) = abs * (cos(angle) + i sin(angle)), as the real and imaginary
// parts of one complex tensor (rotary embeddings build their frequencies with it).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>

#include "aten/ops.h"

namespace tpu::aten {

at::Tensor& polar_out(const at::Tensor& abs, const at::Tensor& angle, at::Tensor& out) {
  TORCH_CHECK(c10::isFloatingType(abs.scalar_type()) && c10::isFloatingType(angle.scalar_type()),
              "Expected both inputs to be Half, Float or Double tensors but got ",
              abs.scalar_type(), " and ", angle.scalar_type());
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
