#pragma once
// PJRT errors as C++ exceptions. check() is the single place where a PJRT_Error
// becomes an exception, and it always frees the PJRT_Error.
#include <stdexcept>
#include <string>
#include <string_view>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

class Error : public std::runtime_error {
 public:
  Error(PJRT_Error_Code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  PJRT_Error_Code code() const { return code_; }
  // RESOURCE_EXHAUSTED, or an allocation failure the plugin reports under another code
  // (the CPU plugin's asynchronous execution reports "Out of memory allocating" as INTERNAL).
  bool is_out_of_memory() const {
    if (code_ == PJRT_Error_Code_RESOURCE_EXHAUSTED) return true;
    std::string_view message = what();
    return message.find("Out of memory") != std::string_view::npos ||
           message.find("out of memory") != std::string_view::npos;
  }

 private:
  PJRT_Error_Code code_;
};

// Throws Error("<what>: <plugin message>") if `error` is non-null; frees it either way.
void check(const PJRT_Api* api, PJRT_Error* error, const char* what);

// Returns the message of `error` and frees it (for callbacks that must not throw).
std::string take_message(const PJRT_Api* api, PJRT_Error* error, PJRT_Error_Code* code = nullptr);

// Zero-initialised PJRT argument struct with struct_size set to the header's size.
template <typename Args>
Args make_args(size_t struct_size) {
  Args args{};
  args.struct_size = struct_size;
  return args;
}

}  // namespace tpu::pjrt

// PJRT_ARGS(PJRT_Client_Create_Args) -> zeroed struct with its struct_size filled.
#define PJRT_ARGS(type) ::tpu::pjrt::make_args<type>(type##_STRUCT_SIZE)
