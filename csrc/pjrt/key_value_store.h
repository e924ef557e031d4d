#pragma once
// The key-value store a multi-process PJRT client shares with the other processes of
// its job (torch_tpu gives it torchrun's c10d store). Multi-process plugins use it while
// the client is created and later (the GPU plugin exchanges its topology and NCCL ids
// through it).
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

#include "pjrt_c_api.h"

namespace tpu::pjrt {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  // The value of `key`, waiting for another process to set it; throws
  // KeyValueTimeout when `timeout` passes first.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // The value of `key`, or nothing at once where it is not set.
  virtual std::optional<std::string> try_get(const std::string& key) = 0;
  virtual void set(const std::string& key, const std::string& value) = 0;
};

class KeyValueTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The callbacks of PJRT_Client_Create_Args over a KeyValueStore passed as their user
// argument. The plugin calls them from its own threads and its frames have no C++
// unwinding to offer, so they catch every exception and return it as a PJRT_Error made
// by the plugin's callback_error (a timeout as DEADLINE_EXCEEDED, a missing key of
// try_get as NOT_FOUND).
struct KeyValueCallbacks {
  PJRT_KeyValueGetCallback get;
  PJRT_KeyValueTryGetCallback try_get;
  PJRT_KeyValuePutCallback put;
};
const KeyValueCallbacks& key_value_callbacks();

}  // namespace tpu::pjrt
