#pragma once
// The job's c10d store (torchrun's TCPStore) as the key-value store of a multi-process
// PJRT client.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "pjrt/key_value_store.h"

namespace tpu::distributed {

class C10dKeyValueStore final : public pjrt::KeyValueStore {
 public:
  explicit C10dKeyValueStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  std::optional<std::string> try_get(const std::string& key) override;
  void set(const std::string& key, const std::string& value) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace tpu::distributed
