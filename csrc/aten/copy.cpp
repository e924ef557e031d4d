// Copies between tpu and CPU (any dtype, any strides, broadcasting as copy_ does)
// and reading single values back.
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include "aten/device_errors.h"
#include "aten/dtype.h"
#include "aten/ops/all.h"
#include "aten/prepared_op.h"
#include "aten/program.h"
#include "aten/storage.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu::aten {

namespace {

bool is_tpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// Whether `t` is exactly its storage's whole buffer, in its buffer's own dtype.
bool is_whole_storage(const at::Tensor& t, const runtime::DeviceStorage& storage) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         static_cast<size_t>(t.numel()) * t.element_size() == storage.nbytes();
}

// A new contiguous CPU tensor with the values of tpu tensor `src`.
at::Tensor download(const at::Tensor& src) {
  at::Tensor host = at::empty(src.sizes(), src.options().device(c10::kCPU));
  if (src.numel() == 0) return host;
  at::Tensor dense = src;
  runtime::DeviceStorage* storage = device_storage(src.storage());
  if (!storage->has_buffer() || !is_whole_storage(src, *storage) ||
      storage->element_type() != element_type(src.scalar_type())) {
    dense = at::empty(src.sizes(), src.options());
    Program p("aten::contiguous");
    p.write(dense, p.read(src));
    p.run();
    storage = device_storage(dense.storage());
  }
  storage->buffer()->to_host(host.data_ptr(), host.nbytes());
  runtime::metrics().count_device_to_host();
  // A value read back from a deferred graph raises that graph's failed checks.
  runtime::Runtime::get().after_host_wait();
  return host;
}

// Replaces the whole storage of `dst` with the contiguous CPU tensor `src` (same dtype and size).
void upload_into(const at::Tensor& dst, const at::Tensor& src) {
  runtime::DeviceStorage* storage = device_storage(dst.storage());
  hlo::ElementType type = element_type(src.scalar_type());
  storage->set_buffer(runtime::Runtime::get().client().buffer_from_host(
                          src.data_ptr(), buffer_type(type), {src.numel()}, storage->device()),
                      type);
  runtime::metrics().count_host_to_device();
}

}  // namespace

// copy_ without the out-of-memory translation.
static at::Tensor& copy_now(at::Tensor& self, const at::Tensor& src, bool non_blocking);

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  c10::DeviceIndex device = is_tpu(self) ? self.device().index() : src.device().index();
  return translating_out_of_memory(
      device, [&]() -> at::Tensor& { return copy_now(self, src, non_blocking); });
}

static at::Tensor& copy_now(at::Tensor& self, const at::Tensor& src, bool /*non_blocking*/) {
  // Copies are synchronous with respect to the host memory involved, so
  // non_blocking=True is always safe to honour as blocking.
  if (self.is_same(src) || self.numel() == 0) return self;
  at::assert_no_internal_overlap(self);
  if (is_tpu(self) && is_tpu(src)) {
    if (self.device() == src.device()) {
      at::assert_no_partial_overlap(self, src);
      PreparedCall call("aten::copy_", {&src, &self}, {});
      if (call.run()) return self;
      Program p("aten::copy_", &call);
      p.write(self, p.read(src));
      p.run();
    } else {
      self.copy_(download(src));  // across devices, through the host
    }
    return self;
  }
  if (is_tpu(self)) {
    TORCH_CHECK(src.is_cpu(), "copying from ", src.device(), " to ", self.device(),
                " is not supported: copy to the CPU first");
    at::Tensor host = src.to(self.scalar_type()).expand(self.sizes()).contiguous();
    c10::DeviceGuard guard(self.device());
    if (is_whole_storage(self, *device_storage(self.storage()))) {
      upload_into(self, host);
    } else {
      at::Tensor staged = at::empty(self.sizes(), self.options());
      upload_into(staged, host);
      Program p("aten::copy_");
      p.write(self, p.read(staged));
      p.run();
    }
    return self;
  }
  TORCH_CHECK(self.is_cpu(), "copying from tpu to ", self.device(),
              " is not supported: copy to the CPU first");
  self.copy_(download(src));
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor out = dst;
  copy_(out, self, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  at::Tensor out = dst;
  copy_(out, self, false);
  return dst;
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  return translating_out_of_memory(self.device().index(), [&] { return download(self).item(); });
}

}  // namespace tpu::aten
