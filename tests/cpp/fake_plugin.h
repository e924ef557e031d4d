#pragma once
// A stand-in PJRT plugin for the C++ tests (tests/cpp/fake_plugin.cpp, the
// tpu_test_fake_plugin module): GetPjrtApi forwards to a real plugin (the CPU plugin,
// or $TORCH_TPU_FAKE_PJRT_TARGET) but returns a copy of its PJRT_Api table altered as
// configured, so that version skew, missing entries and another platform's code paths
// can be tested without that plugin. Each GetPjrtApi call builds a fresh table from the
// configuration of that moment (kept to the end of the process), so one process can load
// the same file under several configurations.
//
// Tests configure it through the functions below (dlsym on the loaded module); without
// that, from the environment (for runs by hand, e.g. `import torch_tpu` with
// TORCH_TPU_PJRT_PLUGIN pointing at the module):
//   TORCH_TPU_FAKE_PJRT_MINOR=115 TORCH_TPU_FAKE_PJRT_TABLE_SIZE=1144
//   TORCH_TPU_FAKE_PJRT_PLATFORM=cuda TORCH_TPU_FAKE_PJRT_MAJOR_DELTA=1
#include <cstddef>
#include <cstdint>

extern "C" {

struct TorchTpuFakePluginConfig {
  int major_delta;  // added to the real plugin's major version
  int minor;        // the minor version reported; < 0: the real one
  // The PJRT_Api struct_size reported; 0: the real one. Larger tables are zero-padded
  // (entries a newer API would have, unset), smaller ones cut entries off.
  size_t table_size;
  size_t null_entries[8];      // offsetof(PJRT_Api, entry) of entries set to null; 0 ends
  const char* platform_name;   // what PJRT_Client_PlatformName reports; null: the real one
  bool fail_platform_version;  // PJRT_Client_PlatformVersion fails (after a successful create)
};

// TorchTpuFakePlugin_Configure: replaces the configuration (copied; platform_name must be
// a literal or live on).
typedef void TorchTpuFakePlugin_ConfigureFn(const TorchTpuFakePluginConfig* config);

// TorchTpuFakePlugin_Stats: what the plugin has seen so far.
struct TorchTpuFakePluginStats {
  int64_t clients_created;
  int64_t clients_destroyed;
  // The options of the last PJRT_Client_Create, one "name=type:value" per line
  // (type: string, int64, int64_list, float, bool); valid until the next create.
  const char* last_create_options;
};
typedef TorchTpuFakePluginStats TorchTpuFakePlugin_StatsFn();

}  // extern "C"
