#include "ffi_extension.h"

#include <cstddef>

#include "error.h"

namespace tpu::pjrt {

namespace {

// PJRT_FFI_Register_Handler_Args as the plugins we support define it (xla-cpu-pjrt 0.0.1,
// read from its code: 52 bytes, the handler at offset 24). Later XLA headers insert an
// api_version before the handler; a plugin built from those would need that layout.
struct FfiRegisterHandlerArgs {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  void* handler;  // an XLA_FFI_Handler*
  const char* platform_name;
  size_t platform_name_size;
  int traits;
};
using FfiRegisterHandler = PJRT_Error*(FfiRegisterHandlerArgs*);

struct FfiExtension {
  PJRT_Extension_Base base;
  void* type_id_register;
  void* user_data_add;
  FfiRegisterHandler* register_handler;  // absent in version 1
};

const FfiExtension* find_ffi_extension(const PJRT_Api* api) {
  for (PJRT_Extension_Base* e = api->extension_start; e != nullptr; e = e->next) {
    if (e->type == PJRT_Extension_Type_FFI) return reinterpret_cast<const FfiExtension*>(e);
  }
  return nullptr;
}

}  // namespace

bool register_ffi_handler(const Plugin& plugin, const std::string& target,
                          const std::string& platform, void* handler) {
  const FfiExtension* ffi = find_ffi_extension(plugin.api());
  if (ffi == nullptr || ffi->base.struct_size < sizeof(FfiExtension) ||
      ffi->register_handler == nullptr) {
    return false;
  }
  FfiRegisterHandlerArgs args{};
  args.struct_size = offsetof(FfiRegisterHandlerArgs, traits) + sizeof(args.traits);
  args.target_name = target.data();
  args.target_name_size = target.size();
  args.handler = handler;
  args.platform_name = platform.data();
  args.platform_name_size = platform.size();
  check(plugin.api(), ffi->register_handler(&args), "registering an FFI handler");
  return true;
}

}  // namespace tpu::pjrt
