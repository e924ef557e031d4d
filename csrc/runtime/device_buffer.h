#pragma once
// The device side of one tpu storage. A storage's DataPtr owns a DeviceStorage;
// the DataPtr address never changes, while the immutable PJRT buffer behind it is
// swapped by every write (that is how views and in-place ops share data).
//
// In the defer_and_fuse mode a storage may instead be *pending*: its contents are
// a value of a DeferredGraph not yet run. Asking for the buffer runs that graph.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hlo/types.h"
#include "pjrt/buffer.h"

namespace tpu::runtime {

class DeferredGraph;

class DeviceStorage {
 public:
  DeviceStorage(int device, size_t nbytes) : device_(device), nbytes_(nbytes) {}
  ~DeviceStorage();
  DeviceStorage(const DeviceStorage&) = delete;
  DeviceStorage& operator=(const DeviceStorage&) = delete;

  int device() const { return device_; }
  size_t nbytes() const { return nbytes_; }

  // True once something was written (a buffer or a pending value); before that
  // the storage reads as zeros.
  bool has_buffer() const { return buffer_ != nullptr || graph_ != nullptr; }
  // The buffer; a pending storage first runs its graph. Throws if that graph failed.
  const pjrt::BufferPtr& buffer();
  // The buffer held now, without running a pending graph or raising its error; may be null.
  PJRT_Buffer* held_buffer() const { return buffer_ != nullptr ? buffer_->get() : nullptr; }
  // The contents are always 1-D: `elements` values of `element_type`.
  hlo::ElementType element_type() const { return element_type_; }
  int64_t elements() const { return elements_; }

  // Replaces the contents with `buffer` (1-D, `type`, covering all nbytes()).
  void set_buffer(pjrt::BufferPtr buffer, hlo::ElementType type);

  // defer_and_fuse: the contents are the value `name` of `graph`.
  DeferredGraph* pending_graph() const { return graph_; }
  const std::string& pending_name() const { return pending_name_; }
  // The shape the pending value was flattened from (empty: unknown); see DeferredGraph.
  const std::vector<int64_t>& pending_shape() const { return pending_shape_; }
  void set_pending(DeferredGraph* graph, std::string name, hlo::ElementType type,
                   const std::vector<int64_t>& shape = {});
  // Called by the graph when it has run (or failed: the error is raised by buffer()).
  void resolve(pjrt::BufferPtr buffer, hlo::ElementType type);
  void fail(const std::string& error);

 private:
  void set_type(hlo::ElementType type);

  int device_;
  size_t nbytes_;
  pjrt::BufferPtr buffer_;
  hlo::ElementType element_type_ = hlo::ElementType::U8;
  int64_t elements_ = 0;
  DeferredGraph* graph_ = nullptr;
  std::string pending_name_;
  std::vector<int64_t> pending_shape_;
  std::string error_;
};

}  // namespace tpu::runtime
