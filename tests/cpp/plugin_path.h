#pragma once
// The plugin the C++ tests run on: $TORCH_TPU_PJRT_PLUGIN, else the CPU plugin found at
// configure time.
#include <cstdlib>
#include <memory>
#include <string>

#include "pjrt/client.h"

namespace tpu::testing {

inline std::string plugin_path() {
  const char* env = std::getenv("TORCH_TPU_PJRT_PLUGIN");
  return env != nullptr ? env : TORCH_TPU_TEST_PLUGIN;
}

// One client shared by every test of the binary (creating one per test is slow).
inline pjrt::Client& shared_client() {
  static auto* client = new pjrt::Client(pjrt::Plugin::load(plugin_path()));
  return *client;
}

}  // namespace tpu::testing
