#include "error.h"

namespace tpu::pjrt {

namespace {
void destroy(const PJRT_Api* api, PJRT_Error* error) {
  auto args = PJRT_ARGS(PJRT_Error_Destroy_Args);
  args.error = error;
  api->PJRT_Error_Destroy(&args);
}

// Destroys the error when it leaves scope: also if copying its message throws.
struct ErrorOwner {
  const PJRT_Api* api;
  PJRT_Error* error;
  ErrorOwner(const ErrorOwner&) = delete;
  ~ErrorOwner() { destroy(api, error); }
};
}  // namespace

std::string take_message(const PJRT_Api* api, PJRT_Error* error, PJRT_Error_Code* code) {
  ErrorOwner owner{api, error};
  auto msg = PJRT_ARGS(PJRT_Error_Message_Args);
  msg.error = error;
  api->PJRT_Error_Message(&msg);
  // The message lives as long as the error: copied before the owner destroys it.
  std::string text(msg.message, msg.message_size);
  if (code != nullptr) {
    auto get_code = PJRT_ARGS(PJRT_Error_GetCode_Args);
    get_code.error = error;
    PJRT_Error* code_error = api->PJRT_Error_GetCode(&get_code);
    if (code_error == nullptr) {
      *code = get_code.code;
    } else {
      destroy(api, code_error);  // the error about the error is ours to free too
      *code = PJRT_Error_Code_UNKNOWN;
    }
  }
  return text;
}

void check(const PJRT_Api* api, PJRT_Error* error, const char* what) {
  if (error == nullptr) return;
  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  std::string text = take_message(api, error, &code);
  throw Error(code, std::string(what) + ": " + text);
}

}  // namespace tpu::pjrt
