// Tensor creation on tpu: empty (no device work at all: storages start without a
// buffer and read as zeros), fill_, zero_, arange and eye.
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>

#include <cmath>

#include "aten/device.h"
#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"
#include "aten/storage.h"

namespace tpu::aten {

namespace {
constexpr c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

c10::DeviceGuard guard_for(std::optional<c10::Device> device) {
  c10::Device where = device.value_or(c10::Device(c10::DeviceType::PrivateUse1));
  if (!where.has_index()) where = c10::Device(c10::DeviceType::PrivateUse1, current_device());
  check_device_index(where.index());
  return c10::DeviceGuard(where);
}
}  // namespace

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<c10::MemoryFormat> memory_format) {
  c10::DeviceGuard guard = guard_for(device);
  element_type(c10::dtype_or_default(dtype));  // rejects dtypes the device cannot hold
  return at::detail::empty_generic(size, allocator(), kTpuKeys, c10::dtype_or_default(dtype),
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  c10::DeviceGuard guard = guard_for(device);
  element_type(c10::dtype_or_default(dtype));
  return at::detail::empty_strided_generic(size, stride, allocator(), kTpuKeys,
                                           c10::dtype_or_default(dtype));
}

at::Tensor new_empty_like(const at::Tensor& like, c10::ScalarType type) {
  if (like.is_contiguous()) return new_empty(like.sizes(), like.options().dtype(type));
  std::vector<int64_t> strides = like.is_non_overlapping_and_dense()
                                     ? like.strides().vec()
                                     : at::infer_dense_strides(like.sizes(), like.strides());
  return empty_strided(like.sizes(), strides, type, std::nullopt, like.device(), std::nullopt);
}

at::Tensor& fill_scalar_(at::Tensor& self, const c10::Scalar& value) {
  PreparedCall call("aten::fill_.Scalar", {&self}, {&value});
  if (call.run()) return self;
  Program p("aten::fill_.Scalar", &call);
  p.write(self, p.scalar(value, self.scalar_type()));
  p.run();
  return self;
}

at::Tensor& fill_tensor_(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  Program p("aten::fill_.Tensor");
  p.write(self, p.read(value, self.scalar_type()));
  p.run();
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  PreparedCall call("aten::zero_", {&self}, {});
  if (call.run()) return self;
  Program p("aten::zero_", &call);
  p.write(self, p.b().constant(0, element_type(self.scalar_type())));
  p.run();
  return self;
}

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step,
                       at::Tensor& out) {
  bool integral = c10::isIntegralType(out.scalar_type(), /*includeBool=*/true);
  double first = start.to<double>(), last = end.to<double>(), delta = step.to<double>();
  TORCH_CHECK(delta != 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(first) && std::isfinite(last), "unsupported range: ", first, " -> ",
              last);
  TORCH_CHECK((delta > 0 && last >= first) || (delta < 0 && last <= first),
              "upper bound and larger bound inconsistent with step sign");
  double count = integral ? std::ceil(static_cast<double>(end.to<int64_t>() - start.to<int64_t>()) /
                                      step.to<int64_t>())
                          : std::ceil((last - first) / delta);
  // As the CPU: an out= of the right element count keeps its shape and layout (a 2x2 view
  // gets the 4 values in its own row-major order); any other is resized, without a warning.
  const int64_t size = static_cast<int64_t>(count);
  if (out.numel() != size) {
    if (out.numel() > 0) {
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ",
                 out.numel(), " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. The out tensor will be "
                 "resized to a tensor of shape (",
                 size, ",).");
    }
    out.resize_({size});
  }
  // start + i * step, in 64 bits like PyTorch's accumulate type, then cast.
  c10::ScalarType wide = integral ? c10::kLong : c10::kDouble;
  hlo::ElementType wide_type = element_type(wide);
  // The count is in out's size; start and step are run-time operands.
  static const char* const kName = "aten::arange.start_out";
  PreparedCall call(kName, {&out}, {&start, &step}, {integral});
  if (call.run()) return out;
  Program p(kName, &call);
  auto& b = p.b();
  std::vector<int64_t> shape{out.numel()};
  hlo::Value index = b.convert(b.iota(hlo::TensorType{hlo::ElementType::S64, shape}, 0), wide_type);
  hlo::Value scaled = b.binary("multiply", index, b.broadcast_to(p.scalar(step, wide), shape));
  hlo::Value values = b.binary("add", scaled, b.broadcast_to(p.scalar(start, wide), shape));
  p.write(out, b.reshape(values, out.sizes().vec()));
  p.run();
  return out;
}

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  at::native::resize_output(out, {n, m});
  Program p("aten::eye.m_out");
  auto& b = p.b();
  hlo::TensorType index{hlo::ElementType::S64, {n, m}};
  p.write(out, b.compare(hlo::Compare::EQ, b.iota(index, 0), b.iota(index, 1)));
  p.run();
  return out;
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) { return eye_m_out(n, n, out); }

}  // namespace tpu::aten
