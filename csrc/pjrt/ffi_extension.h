#pragma once
// The PJRT FFI extension: how a plugin's XLA FFI registry learns about custom-call handlers
// defined outside the plugin. Plugin wheels ship pjrt_c_api.h without the extension's header,
// so the few structs used here are declared in ffi_extension.cpp, following the ABI of the
// plugins we support.
#include <string>

#include "plugin.h"

namespace tpu::pjrt {

// Registers `handler` (an XLA_FFI_Handler*, the typed FFI calling convention) as the custom
// call `target` on the plugin's `platform` ("Host" for XLA:CPU). Returns false when the plugin
// has no FFI extension or one too old to register handlers; throws Error with the plugin's
// message when the plugin refuses the handler.
bool register_ffi_handler(const Plugin& plugin, const std::string& target,
                          const std::string& platform, void* handler);

}  // namespace tpu::pjrt
