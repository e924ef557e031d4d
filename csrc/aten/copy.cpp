// Copies between tpu and CPU (any dtype, any strides, broadcasting as copy_ does)
// and reading single values back.
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <functional>
#include <memory>

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

// A tpu tensor with `src`'s values whose storage is exactly its dense buffer, in its own
// dtype: `src` where it is that, else a contiguous copy. (The buffer lives only as long as
// the tensor: a storage deletes its buffer when it goes.)
at::Tensor dense_source(const at::Tensor& src) {
  runtime::DeviceStorage* storage = device_storage(src.storage());
  if (storage->has_buffer() && is_whole_storage(src, *storage) &&
      storage->element_type() == storage_element_type(src.scalar_type())) {
    return src;
  }
  at::Tensor dense = at::empty(src.sizes(), src.options());
  Program p("aten::contiguous");
  p.write(dense, p.read(src));
  p.run();
  return dense;
}

// A new contiguous CPU tensor with the values of tpu tensor `src`.
at::Tensor download(const at::Tensor& src) {
  at::Tensor host = at::empty(src.sizes(), src.options().device(c10::kCPU));
  if (src.numel() == 0) return host;
  at::Tensor dense = dense_source(src);
  device_storage(dense.storage())->buffer()->to_host(host.data_ptr(), host.nbytes());
  runtime::metrics().count_device_to_host();
  // A value read back from a deferred graph raises that graph's failed checks.
  runtime::Runtime::get().after_host_wait();
  return host;
}

// Replaces the whole storage of `dst` with the contiguous CPU tensor `src` (same dtype and size).
void upload_into(const at::Tensor& dst, const at::Tensor& src) {
  runtime::DeviceStorage* storage = device_storage(dst.storage());
  hlo::ElementType type = storage_element_type(src.scalar_type());
  const int64_t elements = src.numel() * storage_elements_per_value(src.scalar_type());
  storage->set_buffer(runtime::Runtime::get().client().buffer_from_host(
                          src.data_ptr(), buffer_type(type), {elements}, storage->device()),
                      type);
  runtime::metrics().count_host_to_device();
}

// Whether a non_blocking copy between `host` and a tpu tensor like it may return before
// the data has moved, as CUDA's does: only from or into pinned memory (pageable memory
// may be changed or freed right after the call, so PyTorch copies it synchronously), a
// dense tensor of the same dtype and sizes, so PJRT moves it in one transfer.
bool may_copy_asynchronously(const at::Tensor& host, const at::Tensor& device) {
  return host.is_pinned() && host.is_contiguous() && host.scalar_type() == device.scalar_type() &&
         host.sizes() == device.sizes() && host.numel() > 0;
}

// Waits for the non_blocking copies in flight that touch `host`'s memory (its whole
// storage): a copy or write of those bytes comes after them, as on CUDA's one stream.
void wait_for_copies_touching(const at::Tensor& host) {
  const c10::Storage& storage = host.storage();
  if (storage.data() == nullptr) return;
  runtime::Runtime::get().host_transfers().wait_for_overlapping(storage.data(), storage.nbytes());
}

// Starts uploading pinned `src` into the whole storage of `dst`; the host memory is kept
// until the plugin has read it. Work on `dst` is ordered after the copy by its buffer.
void upload_into_asynchronously(const at::Tensor& dst, const at::Tensor& src) {
  runtime::DeviceStorage* storage = device_storage(dst.storage());
  hlo::ElementType type = storage_element_type(src.scalar_type());
  const int64_t elements = src.numel() * storage_elements_per_value(src.scalar_type());
  std::function<void()> done = runtime::Runtime::get().host_transfers().add_upload(
      src.data_ptr(), src.nbytes(), std::make_shared<c10::Storage>(src.storage()));
  pjrt::BufferPtr buffer = runtime::Runtime::get().client().buffer_from_host_async(
      src.data_ptr(), buffer_type(type), {elements}, storage->device(), std::move(done));
  storage->set_buffer(buffer, type);
  runtime::Runtime::get().track({buffer});
  runtime::metrics().count_host_to_device();
  runtime::metrics().count_asynchronous_copy();
}

// Starts downloading `src` into pinned `dst`; synchronize() and events recorded later
// wait for it, and the source buffer and the destination's memory live until it lands.
void download_into_asynchronously(const at::Tensor& dst, const at::Tensor& src) {
  at::Tensor dense = dense_source(src);
  pjrt::BufferPtr buffer = device_storage(dense.storage())->buffer();
  std::shared_ptr<const pjrt::Event> landed = buffer->to_host_async(dst.data_ptr(), dst.nbytes());
  // The source's storage (a storage that goes deletes its buffer) and its buffer: a held
  // buffer is not donated to an in-place op on `src` while the transfer reads it.
  struct Kept {
    c10::Storage source;
    pjrt::BufferPtr buffer;
    c10::Storage destination;
  };
  runtime::Runtime::get().host_transfers().add_download(
      std::move(landed), dst.data_ptr(), dst.nbytes(),
      std::make_shared<Kept>(Kept{dense.storage(), std::move(buffer), dst.storage()}));
  runtime::metrics().count_device_to_host();
  runtime::metrics().count_asynchronous_copy();
}

}  // namespace

// copy_ without the out-of-memory translation.
static at::Tensor& copy_now(at::Tensor& self, const at::Tensor& src, bool non_blocking);

namespace {

// PyTorch's lazy views x.conj() and x._neg_view() keep a bit on the tensor, not in its data
// (every other op resolves them through copy_): a copy between tensors whose bits differ
// conjugates or negates the data, as the CPU's copy_ does.
bool bits_differ(const at::Tensor& self, const at::Tensor& src) {
  return self.is_conj() != src.is_conj() || self.is_neg() != src.is_neg();
}

hlo::Value with_bits_resolved(Program& p, hlo::Value v, const at::Tensor& self,
                              const at::Tensor& src) {
  hlo::Builder& b = p.b();
  if (self.is_conj() != src.is_conj() && hlo::is_complex(v.element())) {
    v = b.make_complex(b.complex_parts(v, false), b.unary("negate", b.complex_parts(v, true)));
  }
  if (self.is_neg() != src.is_neg()) v = b.unary("negate", v);
  return v;
}

// A CPU tensor holding `self`'s data for the logical values of CPU tensor `src`: with the
// bits resolved, then conjugated or negated again where `self` carries a bit.
at::Tensor data_for(const at::Tensor& self, const at::Tensor& src) {
  at::Tensor values = src.resolve_conj().resolve_neg();
  if (self.is_conj()) values = values.conj_physical();
  if (self.is_neg()) values = values.neg();
  return values;
}

// `host`, raw data read back from tpu tensor `src`, seen with src's bits.
at::Tensor with_bits_of(at::Tensor host, const at::Tensor& src) {
  if (src.is_conj()) host = host.conj();
  if (src.is_neg()) host = host._neg_view();
  return host;
}

}  // namespace

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  c10::DeviceIndex device = is_tpu(self) ? self.device().index() : src.device().index();
  return translating_out_of_memory(
      device, [&]() -> at::Tensor& { return copy_now(self, src, non_blocking); });
}

static at::Tensor& copy_now(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  // non_blocking=True returns before the data has moved only with pinned host memory
  // (may_copy_asynchronously); every other copy is synchronous, which it always may be.
  if (self.is_same(src) || self.numel() == 0) return self;
  at::assert_no_internal_overlap(self);
  if (is_tpu(self) && is_tpu(src)) {
    if (self.device() == src.device()) {
      at::assert_no_partial_overlap(self, src);
      if (bits_differ(self, src)) {
        Program p("aten::copy_(resolving conj/neg)");
        p.write(self, with_bits_resolved(p, p.read(src), self, src));
        p.run();
        return self;
      }
      PreparedCall call("aten::copy_", {&src, &self}, {});
      if (call.run()) return self;
      Program p("aten::copy_", &call);
      p.write(self, p.read(src));
      p.run();
    } else {
      self.copy_(with_bits_of(download(src), src));  // across devices, through the host
    }
    return self;
  }
  if (is_tpu(self)) {
    TORCH_CHECK(src.is_cpu(), "copying from ", src.device(), " to ", self.device(),
                " is not supported: copy to the CPU first");
    if (src.is_pinned()) wait_for_copies_touching(src);
    if (bits_differ(self, src) || src.is_conj() || src.is_neg()) {
      at::Tensor data = data_for(self, src);
      // self's raw data, written without its bits (each view undone by the same view again).
      at::Tensor raw = self;
      if (self.is_conj()) raw = raw.conj();
      if (self.is_neg()) raw = raw._neg_view();
      copy_now(raw, data, false);
      return self;
    }
    if (non_blocking && may_copy_asynchronously(src, self) &&
        is_whole_storage(self, *device_storage(self.storage()))) {
      c10::DeviceGuard guard(self.device());
      upload_into_asynchronously(self, src);
      return self;
    }
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
  if (self.is_pinned()) wait_for_copies_touching(self);
  if (src.is_conj() || src.is_neg()) {
    self.copy_(with_bits_of(download(src), src));
    return self;
  }
  if (non_blocking && may_copy_asynchronously(self, src)) {
    c10::DeviceGuard guard(src.device());
    download_into_asynchronously(self, src);
    return self;
  }
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

namespace {

// at::_copy_from_and_resize(src, dst) is how PyTorch's CPU fallback writes an out= result
// back to the device. Its schema does not mark dst as written, so the conjugate and negative
// fallbacks hand the kernel a resolved copy of a conj() or neg view and the result was lost
// (linalg.solve_triangular(..., out=B.conj()) left B as it was). Here, for a dst with either
// bit, the result goes through copy_, which writes through the bits.
at::Tensor copy_from_and_resize_through_bits(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) dst.resize_(self.sizes());
  at::Tensor out = dst;
  out.copy_(self);
  return dst;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize_through_bits));
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize_through_bits));
}

}  // namespace tpu::aten
