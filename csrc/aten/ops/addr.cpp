// addr (beta * self + alpha * outer(vec1, vec2)): PyTorch's composite computes it for tpu;
// these kernels add the CPU kernel's checks of beta and alpha first, which the composite
// leaves out (a boolean beta for a float result was taken as 1).
#include <ATen/ATen.h>
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

at::Tensor addr(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                const c10::Scalar& beta, const c10::Scalar& alpha) {
  check_addr_scalars(self, vec1, vec2, beta, alpha);
  return at::native::math_addr(self, vec1, vec2, beta, alpha);
}

at::Tensor& addr_out(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                     const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_addr_scalars(self, vec1, vec2, beta, alpha);
  return at::native::math_addr_out(self, vec1, vec2, beta, alpha, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addr", TORCH_FN(addr));
  m.impl("addr.out", TORCH_FN(addr_out));
}

}  // namespace tpu::aten
