// Reductions: sum (all, over dims, keepdim, dtype, out=).
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>

#include "aten/dtype.h"
#include "aten/ops.h"
#include "aten/program.h"

namespace tpu::aten {

namespace {

struct Reduced {
  std::vector<int64_t> dims;   // reduced dimensions, wrapped and sorted
  std::vector<int64_t> shape;  // result shape (with 1s in reduced dims if keepdim)
};

Reduced reduced_shape(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {
  const int64_t rank = self.dim();
  std::bitset<at::dim_bitset_size> mask;
  if (!dim.has_value() || dim->empty()) {
    mask.set();
  } else {
    mask = at::dim_list_to_bitset(*dim, rank);
  }
  Reduced r;
  for (int64_t d = 0; d < rank; ++d) {
    if (mask[d]) {
      r.dims.push_back(d);
      if (keepdim) r.shape.push_back(1);
    } else {
      r.shape.push_back(self.size(d));
    }
  }
  return r;
}

c10::ScalarType sum_type(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype.has_value()) return *dtype;
  return c10::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? c10::kLong
                                                                       : self.scalar_type();
}

void lower_sum(const at::Tensor& self, const Reduced& r, c10::ScalarType type,
               const at::Tensor& out) {
  // Half-precision sums accumulate in float32, as PyTorch's CPU kernels do.
  c10::ScalarType accumulate = type == c10::kHalf || type == c10::kBFloat16 ? c10::kFloat : type;
  Program p("aten::sum");
  auto& b = p.b();
  hlo::Value x = p.read(self, accumulate);
  hlo::Value total =
      b.reduce(x, b.constant(0, element_type(accumulate)), hlo::Reduction::Add, r.dims);
  p.write(out, b.reshape(total, r.shape));
  p.run();
}

}  // namespace

at::Tensor sum_dim(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                   std::optional<c10::ScalarType> dtype) {
  Reduced r = reduced_shape(self, dim, keepdim);
  c10::ScalarType type = sum_type(self, dtype);
  at::Tensor out = at::empty(r.shape, self.options().dtype(type));
  lower_sum(self, r, type, out);
  return out;
}

at::Tensor sum(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  return sum_dim(self, std::nullopt, false, dtype);
}

at::Tensor& sum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                    std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  Reduced r = reduced_shape(self, dim, keepdim);
  c10::ScalarType type = dtype.value_or(out.scalar_type());
  TORCH_CHECK(!dtype.has_value() || *dtype == out.scalar_type(),
              "Expected out tensor to have dtype ", *dtype, ", but got ", out.scalar_type(),
              " instead");
  at::native::resize_output(out, r.shape);
  lower_sum(self, r, type, out);
  return out;
}

}  // namespace tpu::aten
