#include "runtime/device_buffer.h"

#include <stdexcept>
#include <string>

#include "runtime/deferred_graph.h"
#include "runtime/memory.h"

namespace tpu::runtime {

DeviceStorage::~DeviceStorage() {
  if (graph_ != nullptr) graph_->forget(this);
  memory().release(device_, nbytes_);
}

const pjrt::BufferPtr& DeviceStorage::buffer() {
  if (graph_ != nullptr) graph_->flush();
  if (!error_.empty()) throw std::runtime_error(error_);
  return buffer_;
}

void DeviceStorage::set_type(hlo::ElementType type) {
  size_t element_bytes = hlo::byte_size(type);
  if (nbytes_ % element_bytes != 0) {
    throw std::logic_error("a storage of " + std::to_string(nbytes_) +
                           " bytes cannot hold whole elements of " + hlo::mlir_name(type));
  }
  element_type_ = type;
  elements_ = static_cast<int64_t>(nbytes_ / element_bytes);
}

void DeviceStorage::set_buffer(pjrt::BufferPtr buffer, hlo::ElementType type) {
  set_type(type);
  // A write from outside the graph replaces the pending value.
  if (graph_ != nullptr) graph_->forget(this);
  graph_ = nullptr;
  error_.clear();
  buffer_ = std::move(buffer);
}

void DeviceStorage::set_pending(DeferredGraph* graph, std::string name, hlo::ElementType type,
                                const std::vector<int64_t>& shape) {
  set_type(type);
  graph_ = graph;
  pending_name_ = std::move(name);
  pending_shape_ = shape;
  error_.clear();
  // The graph holds the old buffer while it is an operand; dropping ours lets it be donated.
  buffer_.reset();
}

void DeviceStorage::resolve(pjrt::BufferPtr buffer, hlo::ElementType type) {
  set_type(type);
  graph_ = nullptr;
  pending_name_.clear();
  buffer_ = std::move(buffer);
}

void DeviceStorage::fail(const std::string& error) {
  graph_ = nullptr;
  pending_name_.clear();
  buffer_.reset();
  error_ = error;
}

}  // namespace tpu::runtime
