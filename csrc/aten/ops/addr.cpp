// addr (beta * self + alpha * outer(vec1, vec2)): PyTorch's composite computes it for tpu;
// these kernels add the CPU kernel's checks of beta and alpha first, which the composite
// leaves out (a boolean beta for a float result was taken as 1).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addr_native.h>
#include <torch/library.h>

namespace tpu::aten {
namespace {

void check_addr_scalars(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                        const c10::Scalar& beta, const c10::Scalar& alpha) {
  const c10::ScalarType result = c10::promoteTypes(
      c10::promoteTypes(self.scalar_type(), vec1.scalar_type()), vec2.scalar_type());
  TORCH_CHECK(result == c10::kBool || !beta.isBoolean(),
              "Boolean beta only supported for Boolean results.");
  TORCH_CHECK(result == c10::kBool || !alpha.isBoolean(),
              "Boolean alpha only supported for Boolean results.");
  const bool integral = c10::isIntegralType(self.scalar_type(), true) &&
                        c10::isIntegralType(vec1.scalar_type(), true) &&
                        c10::isIntegralType(vec2.scalar_type(), true);
  TORCH_CHECK(!integral || beta.isIntegral(true),
              "For integral input tensors, argument beta must not be a floating point number.");
  TORCH_CHECK(!integral || alpha.isIntegral(true),
              "For integral input tensors, argument alpha must not be a floating point number.");
}

// Half-precision results are computed in float32 and rounded once, with beta and alpha
// rounded to the dtype first, as the CPU kernel's scalar loop does; the composite rounded the
// outer product, then each scaled term.
bool half_precision(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2) {
  const c10::ScalarType result = c10::promoteTypes(
      c10::promoteTypes(self.scalar_type(), vec1.scalar_type()), vec2.scalar_type());
  return result == c10::kHalf || result == c10::kBFloat16;
}

at::Tensor addr(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_addr_scalars(self, vec1, vec2, beta, alpha);
  if (!half_precision(self, vec1, vec2)) {
    return at::native::math_addr(self, vec1, vec2, beta, alpha);
  }
  const c10::ScalarType result = c10::promoteTypes(
      c10::promoteTypes(self.scalar_type(), vec1.scalar_type()), vec2.scalar_type());
  // The CPU kernel rounds beta and alpha to the result's dtype first.
  auto rounded = [result](const c10::Scalar& s) -> c10::Scalar {
    if (s.isBoolean() || s.isIntegral(false)) return s;
    return result == c10::kHalf ? static_cast<double>(s.to<c10::Half>())
                                : static_cast<double>(s.to<c10::BFloat16>());
  };
  return at::native::math_addr(self.to(at::kFloat), vec1.to(at::kFloat), vec2.to(at::kFloat),
                               rounded(beta), rounded(alpha))
      .to(result);
}

at::Tensor& addr_out(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                     const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_addr_scalars(self, vec1, vec2, beta, alpha);
  if (!half_precision(self, vec1, vec2)) {
    return at::native::math_addr_out(self, vec1, vec2, beta, alpha, out);
  }
  at::Tensor result = tpu::aten::addr(self, vec1, vec2, beta, alpha);
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addr", TORCH_FN(addr));
  m.impl("addr.out", TORCH_FN(addr_out));
}

}  // namespace tpu::aten
