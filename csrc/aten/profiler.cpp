// Profiler support, for both of PyTorch's profilers:
// - torch.profiler (Kineto): a Kineto child profiler reports every tpu program run
//   (runtime::ProgramTrace) as a device kernel, named after its op or fused graph, on
//   the tpu device's row of the trace, with the time its device spent on it. PyTorch
//   asks for it when ProfilerActivity.PrivateUse1 (the tpu activity) is profiled.
// - torch.autograd.profiler.profile(use_device="tpu") (the legacy path): PyTorch's
//   PrivateUse1 profiler stubs, which time each op between two events
//   (runtime::Marker, as torch.tpu.Event).
#include <c10/util/ApproximateClock.h>
#include <kineto/libkineto.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "aten/device.h"
#include "runtime/marker.h"
#include "runtime/program_trace.h"
#include "runtime/runtime.h"

namespace tpu::aten {
namespace {

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    runtime::program_trace().start();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    runtime::program_trace().stop();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    int64_t correlation = 0;
    for (const runtime::ProgramRun& run : runtime::program_trace().take()) {
      // Kept in buffer_, which outlives the logger's pointers to them (getTraceBuffer()).
      buffer_->emplace_activity(buffer_->span, libkineto::ActivityType::CONCURRENT_KERNEL,
                                run.name);
      libkineto::GenericTraceActivity& activity = *buffer_->activities.back();
      activity.startTime = run.start_ns;
      activity.endTime = run.end_ns;
      activity.device = run.device;
      activity.resource = 0;  // the device's one stream
      activity.id = ++correlation;
      activity.addMetadataQuoted("device_type", "tpu");
      activity.log(logger);
    }
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

 private:
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_ =
      std::make_unique<libkineto::CpuTraceBuffer>();
};

class TpuProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override {
    return activities_;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<libkineto::ActivityType>& requested,
      const libkineto::Config& /*config*/) override {
    // PyTorch asks for device kernels only when the tpu activity is profiled (its
    // CPU activity set includes the PRIVATEUSE1_* runtime types too).
    if (requested.count(libkineto::ActivityType::CONCURRENT_KERNEL) == 0) return nullptr;
    return std::make_unique<Session>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/,
      const std::set<libkineto::ActivityType>& requested,
      const libkineto::Config& config) override {
    return configure(requested, config);
  }

 private:
  std::string name_ = "torch_tpu";
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

class TpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device != nullptr) *device = current_device();
    *event = std::make_shared<runtime::Marker>(runtime::Runtime::get().pending());
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
  }

  // Microseconds, as the CUDA stubs return.
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* start,
                const torch::profiler::impl::ProfilerVoidEventStub* end) const override {
    auto first = std::static_pointer_cast<runtime::Marker>(*start);
    auto second = std::static_pointer_cast<runtime::Marker>(*end);
    return static_cast<float>(second->completed_ns() - first->completed_ns()) / 1000.0f;
  }

  bool enabled() const override { return true; }
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}
  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) op(i);
  }
  void synchronize() const override { runtime::Runtime::get().synchronize(); }
};

const bool registered = [] {
  libkineto::api().registerProfilerFactory([] { return std::make_unique<TpuProfiler>(); });
  static TpuProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  return true;
}();

}  // namespace
}  // namespace tpu::aten
