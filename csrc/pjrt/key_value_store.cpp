#include "key_value_store.h"

#include <cstring>
#include <exception>
#include <memory>
#include <new>

namespace tpu::pjrt {
namespace {

// The plugin copies a returned value and then frees it with the deleter we name.
char* copy_for_plugin(const std::string& value, size_t* size) {
  auto copy = std::make_unique<char[]>(value.size() + 1);
  std::memcpy(copy.get(), value.data(), value.size());
  copy[value.size()] = '\0';
  *size = value.size();
  return copy.release();
}

void delete_value(char* value) { std::unique_ptr<char[]> owned(value); }

PJRT_Error* report(PJRT_CallbackError* callback_error, PJRT_Error_Code code,
                   const std::string& message) {
  return (*callback_error)(code, message.data(), message.size());
}

// Runs `body` with the key copied out of the plugin's arguments; any exception becomes the
// PJRT_Error the plugin expects. The plugin calls us through C frames on its own threads:
// nothing may propagate out (that is std::terminate), not even an allocation failure while
// reporting a failure, hence the last resort with a fixed message.
template <typename Body>
PJRT_Error* guarded(PJRT_CallbackError* callback_error, const char* key_data, size_t key_size,
                    Body&& body) noexcept {
  try {
    std::string key(key_data, key_size);
    try {
      return body(key);
    } catch (const KeyValueTimeout& e) {
      return report(callback_error, PJRT_Error_Code_DEADLINE_EXCEEDED,
                    "torch_tpu key-value store: key '" + key + "': " + e.what());
    } catch (const std::exception& e) {
      return report(callback_error, PJRT_Error_Code_INTERNAL,
                    "torch_tpu key-value store: key '" + key + "': " + e.what());
    } catch (...) {
      return report(callback_error, PJRT_Error_Code_INTERNAL,
                    "torch_tpu key-value store: key '" + key + "': unknown error");
    }
  } catch (...) {
    static const char kMessage[] = "torch_tpu key-value store: out of memory reporting an error";
    return (*callback_error)(PJRT_Error_Code_INTERNAL, kMessage, sizeof(kMessage) - 1);
  }
}

PJRT_Error* get(PJRT_KeyValueGetCallback_Args* args) {
  return guarded(args->callback_error, args->key, args->key_size,
                 [args](const std::string& key) -> PJRT_Error* {
                   auto* store = static_cast<KeyValueStore*>(args->user_arg);
                   std::string value =
                       store->get(key, std::chrono::milliseconds(args->timeout_in_ms));
                   args->value = copy_for_plugin(value, &args->value_size);
                   args->value_deleter_callback = &delete_value;
                   return nullptr;
                 });
}

PJRT_Error* try_get(PJRT_KeyValueTryGetCallback_Args* args) {
  return guarded(args->callback_error, args->key, args->key_size,
                 [args](const std::string& key) -> PJRT_Error* {
                   auto* store = static_cast<KeyValueStore*>(args->user_arg);
                   std::optional<std::string> value = store->try_get(key);
                   if (!value) {
                     return report(args->callback_error, PJRT_Error_Code_NOT_FOUND,
                                   "torch_tpu key-value store: key '" + key + "' is not set");
                   }
                   args->value = copy_for_plugin(*value, &args->value_size);
                   args->value_deleter_callback = &delete_value;
                   return nullptr;
                 });
}

PJRT_Error* put(PJRT_KeyValuePutCallback_Args* args) {
  return guarded(args->callback_error, args->key, args->key_size,
                 [args](const std::string& key) -> PJRT_Error* {
                   auto* store = static_cast<KeyValueStore*>(args->user_arg);
                   store->set(key, std::string(args->value, args->value_size));
                   return nullptr;
                 });
}

}  // namespace

const KeyValueCallbacks& key_value_callbacks() {
  static const KeyValueCallbacks callbacks{&get, &try_get, &put};
  return callbacks;
}

}  // namespace tpu::pjrt
