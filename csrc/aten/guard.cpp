// The tpu DeviceGuardImpl (what c10::DeviceGuard and torch.tpu.device use) and the
// current-device state. There is one stream per device: PJRT orders work itself.
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "aten/device.h"
#include "runtime/runtime.h"

namespace tpu::aten {

namespace {
thread_local c10::DeviceIndex current = 0;
}

c10::DeviceIndex device_count() {
  if (!runtime::Runtime::is_initialized()) return 0;
  return static_cast<c10::DeviceIndex>(runtime::Runtime::get().device_count());
}

void check_device_index(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < device_count(),
              "Invalid device index tpu:", static_cast<int>(index), ": there are ",
              static_cast<int>(device_count()), " tpu devices");
}

c10::DeviceIndex current_device() { return current; }

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

  c10::Stream exchangeStream(c10::Stream stream) const override { return stream; }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  // Events: PJRT executes a device's programs in dependency order, so recording and
  // blocking have nothing to enforce.
  void record(void** /*event*/, const c10::Stream& /*stream*/, const c10::DeviceIndex /*index*/,
              const c10::EventFlag /*flag*/) const override {}
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* /*event*/, const c10::DeviceIndex /*index*/) const noexcept override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace
}  // namespace tpu::aten
