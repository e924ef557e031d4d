// The tpu DeviceGuardImpl (what c10::DeviceGuard, torch.tpu.device, torch.Stream,
// torch.Event and torch.accelerator use) and the current-device state.
//
// There is one stream per device, stream 0: PJRT runs a device's programs in the order
// their data dependencies need, so there is nothing for a second stream to overlap or
// reorder. A "new" stream is that same stream. An event is a runtime::Marker: it
// completes when the work pending at record time has finished, and keeps that time.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceCapability.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <memory>

#include "aten/device.h"
#include "aten/device_errors.h"
#include "aten/dtype.h"
#include "runtime/marker.h"
#include "runtime/runtime.h"

namespace tpu::aten {

namespace {
// -1: this thread has not chosen a device, so it uses the process's (under torchrun,
// the rank's own device, also on PyTorch's autograd and c10d threads).
thread_local c10::DeviceIndex current = -1;
std::atomic<c10::DeviceIndex> process_device{0};
}  // namespace

c10::DeviceIndex device_count() {
  if (!runtime::Runtime::is_initialized()) return 0;
  return static_cast<c10::DeviceIndex>(runtime::Runtime::get().device_count());
}

void check_device_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count(),
              "Invalid device index tpu:", static_cast<int>(index), ": there are ",
              static_cast<int>(device_count()), " tpu devices");
}

c10::DeviceIndex current_device() { return current >= 0 ? current : process_device.load(); }

void set_process_device(c10::DeviceIndex index) {
  check_device_index(index);
  process_device = index;
}

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  current = index;
}

namespace {

class TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }

  c10::Device exchangeDevice(c10::Device device) const override {
    c10::Device old = getDevice();
    if (device.index() != old.index()) set_current_device(device.index());
    return old;
  }

  c10::Device getDevice() const override {
    return c10::Device(c10::DeviceType::PrivateUse1, current_device());
  }

  void setDevice(c10::Device device) const override { set_current_device(device.index()); }

  void uncheckedSetDevice(c10::Device device) const noexcept override { current = device.index(); }

  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream getDefaultStream(c10::Device device) const override { return getStream(device); }

  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    return getStream(device);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*high_priority*/) const override {
    return getStream(device);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override { return stream; }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  c10::DeviceCapability getDeviceCapability(c10::Device /*device*/) const override {
    c10::DeviceCapability capability;
#define TPU_SET_CAPABILITY(_, name) \
  capability.capability_data.supported_scalar_types.has_##name = supported(c10::ScalarType::name);
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX_AND_QINTS(TPU_SET_CAPABILITY)
#undef TPU_SET_CAPABILITY
    return capability;
  }

  bool queryStream(const c10::Stream& /*stream*/) const override {
    runtime::Runtime::get().flush_deferred();
    for (const pjrt::BufferPtr& buffer : runtime::Runtime::get().pending()) {
      if (!buffer->ready_event()->is_ready()) return false;
    }
    return runtime::Runtime::get().host_transfers().downloads_landed();
  }

  // The runtime tracks pending work for all devices together, so these wait for all.
  void synchronizeStream(const c10::Stream& /*stream*/) const override { synchronize(); }
  void synchronizeDevice(const c10::DeviceIndex /*index*/) const override { synchronize(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(index == -1 || index == stream.device_index(), "Event device index ",
                static_cast<int>(index), " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    if (*event == nullptr) {
      *event = std::make_unique<Event>(Event{nullptr, flag == c10::EventFlag::BACKEND_DEFAULT})
                   .release();  // owned by the c10::Event until destroyEvent
    }
    // Work deferred so far (defer_and_fuse) is enqueued first, so the event covers it.
    runtime::Runtime::get().flush_deferred();
    static_cast<Event*>(*event)->marker = std::make_unique<runtime::Marker>(
        runtime::Runtime::get().pending(),
        runtime::Runtime::get().host_transfers().pending_downloads());
  }

  // Work on the one stream is already ordered: nothing to wait for.
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}

  bool queryEvent(void* event) const override {
    auto* recorded = static_cast<Event*>(event);
    return recorded == nullptr || recorded->marker == nullptr || recorded->marker->query();
  }

  void synchronizeEvent(void* event) const override {
    auto* recorded = static_cast<Event*>(event);
    if (recorded == nullptr || recorded->marker == nullptr) return;
    try {
      recorded->marker->wait();
    } catch (const std::exception& e) {
      TORCH_CHECK(false, e.what());
    }
  }

  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*index*/) const override {
    auto* first = static_cast<Event*>(start);
    auto* second = static_cast<Event*>(end);
    TORCH_CHECK(first != nullptr && second != nullptr && first->marker != nullptr &&
                    second->marker != nullptr,
                "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(first->timing && second->timing,
                "Both events must be created with argument 'enable_timing=True'.");
    synchronizeEvent(start);
    synchronizeEvent(end);
    return static_cast<double>(second->marker->completed_ns() - first->marker->completed_ns()) /
           1e6;
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*index*/) const noexcept override {
    std::unique_ptr<Event> owned(static_cast<Event*>(event));
  }

 private:
  struct Event {
    std::unique_ptr<runtime::Marker> marker;  // null until recorded
    bool timing = false;                      // created with enable_timing=True
  };

  static void synchronize() {
    try {
      translating_out_of_memory(current_device(), [] { runtime::Runtime::get().synchronize(); });
    } catch (const c10::Error&) {
      throw;
    } catch (const std::exception& e) {
      TORCH_CHECK(false, e.what());
    }
  }

  static bool supported(c10::ScalarType type) {
    try {
      element_type(type);
      return true;
    } catch (const c10::Error&) {
      return false;
    }
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace

// A storage's buffers stay alive while any program that uses them runs (PJRT holds
// them), and there is one stream per device: there is nothing to record. FSDP and DDP
// code calls this on every tensor it hands to another stream.
void record_stream(at::Tensor& /*self*/, c10::Stream /*stream*/) {}

}  // namespace tpu::aten
