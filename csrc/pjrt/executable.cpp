#include "executable.h"

#include "compiled_program.h"
#include "error.h"

namespace tpu::pjrt {

namespace {
// Owns the PJRT_Executable view of a loaded executable for one call.
struct ExecutableView {
  const PJRT_Api* api;
  PJRT_Executable* executable;
  ExecutableView(const ExecutableView&) = delete;
  ~ExecutableView() {
    auto args = PJRT_ARGS(PJRT_Executable_Destroy_Args);
    args.executable = executable;
    PJRT_Error* error = api->PJRT_Executable_Destroy(&args);
    if (error != nullptr) take_message(api, error);
  }
};

ExecutableView view_of(const PJRT_Api* api, PJRT_LoadedExecutable* loaded) {
  auto args = PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  args.loaded_executable = loaded;
  check(api, api->PJRT_LoadedExecutable_GetExecutable(&args),
        "PJRT_LoadedExecutable_GetExecutable");
  return ExecutableView{api, args.executable};
}
}  // namespace

Executable::Executable(std::shared_ptr<const Plugin> plugin, PJRT_LoadedExecutable* executable)
    : plugin_(std::move(plugin)), executable_(executable) {
  const PJRT_Api* api = plugin_->api();
  ExecutableView view = view_of(api, executable_);
  auto args = PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  args.executable = view.executable;
  check(api, api->PJRT_Executable_NumOutputs(&args), "PJRT_Executable_NumOutputs");
  num_outputs_ = args.num_outputs;
}

Executable::~Executable() {
  auto args = PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  args.executable = executable_;
  PJRT_Error* error = plugin_->api()->PJRT_LoadedExecutable_Destroy(&args);
  if (error != nullptr) take_message(plugin_->api(), error);
}

std::vector<BufferPtr> Executable::execute(const std::vector<PJRT_Buffer*>& inputs,
                                           PJRT_Device* device, int launch_id) const {
  const PJRT_Api* api = plugin_->api();
  auto options = PJRT_ARGS(PJRT_ExecuteOptions);
  options.launch_id = launch_id;
  std::vector<PJRT_Buffer*> outputs(num_outputs_, nullptr);
  PJRT_Buffer* const* argument_list = inputs.data();
  PJRT_Buffer** output_list = outputs.data();

  auto args = PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  args.executable = executable_;
  args.options = &options;
  args.argument_lists = &argument_list;
  args.num_devices = 1;
  args.num_args = inputs.size();
  args.output_lists = &output_list;
  args.execute_device = device;  // portable executables run where they are told
  check(api, api->PJRT_LoadedExecutable_Execute(&args), "PJRT_LoadedExecutable_Execute");

  // Each output is ours to destroy from here on, also if adopting the next one throws.
  std::vector<BufferPtr> result;
  size_t adopted = 0;
  try {
    result.reserve(outputs.size());
    for (; adopted < outputs.size(); ++adopted) {
      result.push_back(std::make_shared<Buffer>(plugin_, outputs[adopted]));
    }
  } catch (...) {
    for (size_t i = adopted; i < outputs.size(); ++i) Buffer owner(plugin_, outputs[i]);
    throw;
  }
  return result;
}

void Executable::set_pinned(int device, std::unique_ptr<Executable> copy) const {
  // Called once, by the run that reached the pinning count; readers see the copy only
  // once pinned_device_ publishes it.
  pinned_ = std::move(copy);
  pinned_device_.store(device, std::memory_order_release);
}

std::string Executable::serialize() const {
  const PJRT_Api* api = plugin_->api();
  ExecutableView view = view_of(api, executable_);
  return serialize_executable(api, view.executable);
}

}  // namespace tpu::pjrt
