#include "runtime/runtime.h"

#include <mutex>
#include <stdexcept>

namespace tpu::runtime {

namespace {
std::mutex init_mutex;
Runtime* instance = nullptr;  // intentionally leaked: plugins must outlive every buffer
}  // namespace

Runtime::Runtime(std::shared_ptr<pjrt::Plugin> plugin)
    : plugin_(std::move(plugin)),
      client_(std::make_unique<pjrt::Client>(plugin_)),
      programs_(std::make_unique<ProgramCache>(*client_)) {}

Runtime& Runtime::initialize(const std::string& plugin_path) {
  std::lock_guard<std::mutex> lock(init_mutex);
  if (instance != nullptr) {
    if (instance->plugin_->path() != plugin_path) {
      throw std::runtime_error("torch_tpu is already using the PJRT plugin '" +
                               instance->plugin_->path() + "'; cannot switch to '" + plugin_path +
                               "' in the same process");
    }
    return *instance;
  }
  auto runtime = std::unique_ptr<Runtime>(new Runtime(pjrt::Plugin::load(plugin_path)));
  instance = runtime.release();
  return *instance;
}

Runtime& Runtime::get() {
  if (instance == nullptr) {
    throw std::runtime_error("the tpu runtime is not initialized: import torch_tpu first");
  }
  return *instance;
}

bool Runtime::is_initialized() { return instance != nullptr; }

}  // namespace tpu::runtime
