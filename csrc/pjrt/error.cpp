#include "error.h"

namespace tpu::pjrt {

std::string take_message(const PJRT_Api* api, PJRT_Error* error, PJRT_Error_Code* code) {
  auto msg = PJRT_ARGS(PJRT_Error_Message_Args);
  msg.error = error;
  api->PJRT_Error_Message(&msg);
  std::string text(msg.message, msg.message_size);
  if (code != nullptr) {
    auto get_code = PJRT_ARGS(PJRT_Error_GetCode_Args);
    get_code.error = error;
    PJRT_Error* code_error = api->PJRT_Error_GetCode(&get_code);
    *code = code_error == nullptr ? get_code.code : PJRT_Error_Code_UNKNOWN;
  }
  auto destroy = PJRT_ARGS(PJRT_Error_Destroy_Args);
  destroy.error = error;
  api->PJRT_Error_Destroy(&destroy);
  return text;
}

void check(const PJRT_Api* api, PJRT_Error* error, const char* what) {
  if (error == nullptr) return;
  PJRT_Error_Code code = PJRT_Error_Code_UNKNOWN;
  std::string text = take_message(api, error, &code);
  throw Error(code, std::string(what) + ": " + text);
}

}  // namespace tpu::pjrt
