// Losses: mse_loss and its backward.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Reduction.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

std::vector<int64_t> loss_shape(const at::Tensor& self, const at::Tensor& target,
                                int64_t reduction) {
  if (reduction != at::Reduction::None) return {};
  return at::infer_size(self.sizes(), target.sizes());
}

void lower_mse(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
               const at::Tensor& out) {
  TORCH_CHECK(reduction >= at::Reduction::None && reduction <= at::Reduction::Sum,
              "mse_loss: invalid reduction ", reduction);
  std::vector<int64_t> shape = at::infer_size(self.sizes(), target.sizes());
  c10::ScalarType type = at::result_type(self, target);
  Program p("aten::mse_loss");
  auto& b = p.b();
  hlo::Value diff = b.binary("subtract", b.broadcast_to(p.read(self, type), shape),
                             b.broadcast_to(p.read(target, type), shape));
  hlo::Value squared = b.binary("multiply", diff, diff);
  if (reduction == at::Reduction::None) {
    p.write(out, squared);
  } else {
    std::vector<int64_t> all(shape.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    hlo::ElementType element = element_type(type);
    hlo::Value total = b.reduce(squared, b.constant(0, element), hlo::Reduction::Add, all);
    if (reduction == at::Reduction::Mean) {
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      total = b.binary("divide", total, b.constant(static_cast<double>(count), element));
    }
    p.write(out, total);
  }
  p.run();
}

}  // namespace

at::Tensor mse_loss(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  at::Tensor out = at::empty(loss_shape(self, target, reduction),
                             self.options().dtype(at::result_type(self, target)));
  lower_mse(self, target, reduction, out);
  return out;
}

at::Tensor& mse_loss_out(const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                         at::Tensor& out) {
  at::native::resize_output(out, loss_shape(self, target, reduction));
  lower_mse(self, target, reduction, out);
  return out;
}

at::Tensor mse_loss_backward(const at::Tensor& grad_output, const at::Tensor& self,
                             const at::Tensor& target, int64_t reduction) {
  std::vector<int64_t> shape = at::infer_size(self.sizes(), target.sizes());
  c10::ScalarType type = at::result_type(self, target);
  at::Tensor out = at::empty(shape, self.options().dtype(type));
  double scale = 2.0;
  if (reduction == at::Reduction::Mean) {
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    scale /= static_cast<double>(count);
  }
  Program p("aten::mse_loss_backward");
  auto& b = p.b();
  hlo::Value diff = b.binary("subtract", b.broadcast_to(p.read(self, type), shape),
                             b.broadcast_to(p.read(target, type), shape));
  hlo::Value grad = b.broadcast_to(p.read(grad_output, type), shape);
  hlo::Value factor = b.broadcast_to(b.constant(scale, element_type(type)), shape);
  p.write(out, b.binary("multiply", b.binary("multiply", diff, factor), grad));
  p.run();
  return out;
}

}  // namespace tpu::aten
