#include "distributed/c10d_key_value_store.h"

namespace tpu::distributed {
namespace {

std::string as_string(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

std::string C10dKeyValueStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  try {
    store_->wait({key}, timeout);
  } catch (const c10::DistStoreError& e) {
    // c10d reports a wait that timed out as a store error.
    throw pjrt::KeyValueTimeout(e.what_without_backtrace());
  }
  return as_string(store_->get(key));
}

std::optional<std::string> C10dKeyValueStore::try_get(const std::string& key) {
  if (!store_->check({key})) return std::nullopt;
  return as_string(store_->get(key));
}

void C10dKeyValueStore::set(const std::string& key, const std::string& value) {
  store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
}

}  // namespace tpu::distributed
