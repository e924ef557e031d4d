// Matrix products: mm.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include "aten/dtype.h"
#include "aten/ops.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

void check_mm(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (",
              self.size(0), "x", self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(),
              "expected mat1 and mat2 to have the same dtype, but got: ", self.dtype(), " != ",
              mat2.dtype());
}

void lower_mm(const at::Tensor& self, const at::Tensor& mat2, const at::Tensor& out) {
  c10::ScalarType type = self.scalar_type();
  // Half-precision products accumulate in float32, as on PyTorch's CPU.
  c10::ScalarType accumulate =
      type == c10::kHalf || type == c10::kBFloat16 ? c10::kFloat : type;
  Program p("aten::mm");
  auto& b = p.b();
  hlo::Value product = b.dot_general(p.read(self), p.read(mat2), {}, {}, {1}, {0},
                                     element_type(accumulate));
  p.write(out, product);
  p.run();
}

}  // namespace

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  check_mm(self, mat2);
  at::Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options());
  lower_mm(self, mat2, out);
  return out;
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_mm(self, mat2);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "expected out to have dtype ",
              self.dtype(), " but got ", out.dtype());
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  lower_mm(self, mat2, out);
  return out;
}

}  // namespace tpu::aten
