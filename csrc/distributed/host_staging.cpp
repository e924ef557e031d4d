#include "distributed/host_staging.h"

#include <ATen/ATen.h>

#include "aten/host_access.h"
#include "aten/torch_compat.h"

namespace tpu::distributed {

at::Tensor to_host(const at::Tensor& t) {
  if (t.is_cpu()) return t.contiguous();
  if (!t.is_contiguous()) {
    return t.to(t.options().device(c10::kCPU), /*non_blocking=*/false, /*copy=*/false,
                at::MemoryFormat::Contiguous);
  }
  at::Tensor host = host_like(t);
  aten::read_to_host(t, host);
  return host;
}

at::Tensor host_like(const at::Tensor& t) {
  return aten::staging_tensor(t.sizes(), t.scalar_type());
}

void write_back(const at::Tensor& t, const at::Tensor& host) {
  if (t.is_cpu() && t.data_ptr() == host.data_ptr() && t.scalar_type() == host.scalar_type())
    return;
  if (!t.is_cpu() && host.scalar_type() == t.scalar_type() && host.is_contiguous()) {
    aten::adopt_host(t, host);  // the last use of host: the device may keep its memory
    return;
  }
  t.copy_(host.scalar_type() == t.scalar_type() ? host : host.to(t.scalar_type()));
}

at::Tensor as_bytes(const at::Tensor& host) {
  TORCH_INTERNAL_ASSERT(host.is_cpu() && host.is_contiguous());
  if (host.scalar_type() == at::kByte) return host.reshape({-1});
  if (host.numel() == 0) return at::empty({0}, host.options().dtype(at::kByte));
  return host.reshape({-1}).view(at::kByte);
}

ReduceCarrier reduce_carrier(at::ScalarType dtype, const c10d::ReduceOp& op) {
  ReduceCarrier carrier{dtype, op, false};
  if (op.op_ == c10d::ReduceOp::AVG || op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    carrier.op = c10d::ReduceOp(c10d::ReduceOp::SUM);
    carrier.average = op.op_ == c10d::ReduceOp::AVG;
  }
  if (dtype == at::kShort) carrier.dtype = at::kInt;  // exact: the result wraps the same
  if (dtype == at::kBool) {
    carrier.dtype = at::kByte;
    if (carrier.op.op_ == c10d::ReduceOp::SUM) carrier.op = c10d::ReduceOp(c10d::ReduceOp::MAX);
    if (carrier.op.op_ == c10d::ReduceOp::PRODUCT) carrier.op = c10d::ReduceOp(c10d::ReduceOp::MIN);
  }
  if (at::isComplexType(dtype)) carrier.dtype = c10::toRealValueType(dtype);
  return carrier;
}

void apply_premul(at::Tensor& host, const c10d::ReduceOp& op) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return;
  auto* supplement = dynamic_cast<compat::PreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "PREMUL_SUM without a factor");
  if (supplement->tensor_factor.defined())
    host.mul_(supplement->tensor_factor.to(c10::kCPU));
  else
    host.mul_(supplement->double_factor);
}

}  // namespace tpu::distributed
