#include "aten/prepared_op.h"

#include <ATen/Context.h>
#include <c10/util/SmallVector.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "aten/device_errors.h"
#include "aten/eager_mode.h"
#include "aten/program.h"
#include "aten/storage.h"
#include "runtime/deferred_graph.h"
#include "runtime/metrics.h"
#include "runtime/runtime.h"

namespace tpu::aten {

struct PreparedEntry {
  // Strict mode. Weak: the program cache decides how many programs stay loaded (XLA:CPU
  // maps memory regions per program, TORCH_TPU_MAX_PROGRAMS); an evicted one is lowered
  // again.
  std::weak_ptr<pjrt::Executable> executable;
  std::vector<PreparedCall::Operand> operands;
  std::vector<PreparedCall::Output> outputs;
  // defer_and_fuse mode: what DeferredGraph::record takes.
  std::string function;
  std::vector<hlo::Callee> callees;
  std::vector<hlo::TensorType> output_types;
  std::vector<std::vector<int64_t>> output_shapes;
};

namespace {

using Entry = PreparedEntry;

struct SignatureHash {
  size_t operator()(const std::vector<int64_t>& words) const {
    uint64_t hash = 1469598103934665603ull;  // FNV-1a over the words
    for (int64_t word : words) {
      hash ^= static_cast<uint64_t>(word);
      hash *= 1099511628211ull;
    }
    return static_cast<size_t>(hash);
  }
};

class Table {
 public:
  std::shared_ptr<const Entry> find(const std::vector<int64_t>& signature) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(signature);
    return it == entries_.end() ? nullptr : it->second;
  }
  void insert(std::vector<int64_t> signature, std::shared_ptr<const Entry> entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    // A bound with no bookkeeping per hit: when full, every entry goes at once (the
    // program cache still holds their executables, so re-preparing costs one lowering).
    if (entries_.size() >= kMaxEntries) entries_.clear();
    entries_.insert_or_assign(std::move(signature), std::move(entry));
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.clear();
  }

 private:
  static constexpr size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<const Entry>, SignatureHash> entries_;
};

Table& table() {
  static Table prepared;
  return prepared;
}

// A Scalar's kind decides type promotion; its value is a run-time operand.
int64_t scalar_kind(const c10::Scalar& s) {
  if (s.isBoolean()) return 1;
  if (s.isComplex()) return 2;
  if (s.isFloatingPoint()) return 3;
  return s.isUnsigned() ? 5 : 4;
}

}  // namespace

void clear_prepared_ops() { table().clear(); }

bool prepared_ops_enabled() {
  static const bool enabled = [] {
    const char* text = std::getenv("TORCH_TPU_PREPARED_OPS");
    return text == nullptr || std::string_view(text) != "0";
  }();
  return enabled;
}

PreparedCall::PreparedCall(const char* op, c10::ArrayRef<const at::Tensor*> tensors,
                           c10::ArrayRef<const c10::Scalar*> scalars,
                           const std::vector<int64_t>& statics)
    : op_(op), tensors_(tensors.begin(), tensors.end()), scalars_(scalars.begin(), scalars.end()) {
  if (!prepared_ops_enabled()) return;
  const EagerMode mode = eager_mode();
  if (mode != EagerMode::Strict && mode != EagerMode::DeferAndFuse) return;
  deferred_ = mode == EagerMode::DeferAndFuse;
  // Written through a pointer into a vector sized for the longest signature: a small op's
  // whole host path is a few microseconds, and growing the vector word by word showed up.
  size_t bound = 2 + statics.size() + scalars_.size();
  for (const at::Tensor* t : tensors_)
    bound += t != nullptr && t->defined() ? 10 + 2 * t->dim() : 1;
  signature_.resize(bound);
  int64_t* word = signature_.data();
  // The op's name is a literal of its lowering: its address names it (two literals of one
  // name are two keys for one program, which is harmless).
  *word++ = reinterpret_cast<intptr_t>(op);
  *word++ = deferred_;  // a prepared strict call and a recorded one are kept apart
  for (int64_t s : statics) *word++ = s;
  c10::SmallVector<const void*, 8> storages;  // of the slots so far: which share one
  // A multi-tensor call (a _foreach_ op over a model's parameters) has hundreds of slots: its
  // first slot per storage is found by hashing, not by a scan of the slots before.
  std::unordered_map<const void*, int64_t> first_slot;
  const bool many = tensors_.size() > 16;
  for (const at::Tensor* t : tensors_) {
    const void* storage = nullptr;
    if (t == nullptr || !t->defined()) {
      *word++ = 0;
      storages.push_back(nullptr);
      continue;
    }
    const bool cpu = t->is_cpu();
    // Other devices and CPU tensors with dimensions are errors the lowering raises.
    if (!cpu && t->device().type() != c10::DeviceType::PrivateUse1) return;
    if (cpu && t->dim() != 0) return;
    *word++ = cpu ? 1 : 2;
    *word++ = static_cast<int64_t>(t->scalar_type());
    *word++ = t->is_conj() * 2 + t->is_neg();
    *word++ = cpu ? -1 : t->device().index();
    *word++ = t->dim();
    for (int64_t size : t->sizes()) *word++ = size;
    for (int64_t stride : t->strides()) *word++ = stride;
    *word++ = t->storage_offset() != 0;
    if (!cpu && t->numel() > 0) {
      runtime::DeviceStorage* device = device_storage(t->storage());
      if (device == nullptr) return;
      storage = device;
      *word++ = static_cast<int64_t>(device->nbytes());
      *word++ = static_cast<int64_t>(device->element_type());
    }
    int64_t alias = -1;
    if (many && storage != nullptr) {
      auto [found, inserted] = first_slot.emplace(storage, static_cast<int64_t>(storages.size()));
      if (!inserted) alias = found->second;
    }
    for (size_t i = 0; !many && storage != nullptr && i < storages.size(); ++i) {
      if (storages[i] == storage) {
        alias = static_cast<int64_t>(i);
        break;
      }
    }
    *word++ = alias;
    storages.push_back(storage);
  }
  for (const c10::Scalar* s : scalars_) *word++ = s == nullptr ? 0 : scalar_kind(*s);
  signature_.resize(word - signature_.data());
  eligible_ = true;
}

int PreparedCall::tensor_slot(const at::Tensor& tensor) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i] != nullptr &&
        tensors_[i]->unsafeGetTensorImpl() == tensor.unsafeGetTensorImpl())
      return static_cast<int>(i);
  }
  return -1;
}

int PreparedCall::storage_slot(const void* storage) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const at::Tensor* t = tensors_[i];
    if (t == nullptr || !t->defined() || t->is_cpu() || t->numel() == 0) continue;
    if (device_storage(t->storage()) == storage) return static_cast<int>(i);
  }
  return -1;
}

int PreparedCall::scalar_slot(const c10::Scalar& scalar) const {
  for (size_t i = 0; i < scalars_.size(); ++i) {
    if (scalars_[i] == &scalar) return static_cast<int>(i);
  }
  return -1;
}

bool PreparedCall::keep(std::shared_ptr<Entry> entry) {
  if (!eligible_ || entry->outputs.empty()) return false;
  for (const Operand& operand : entry->operands) {
    if (operand.source.kind == OperandSource::Kind::Unknown || operand.source.slot < 0)
      return false;
  }
  for (const Output& output : entry->outputs) {
    if (output.slot < 0) return false;
  }
  table().insert(signature_, std::move(entry));
  return true;
}

void PreparedCall::prepare(std::shared_ptr<pjrt::Executable> executable,
                           std::vector<Operand> operands, std::vector<Output> outputs) {
  if (!eligible_) return;
  auto entry = std::make_shared<Entry>();
  entry->executable = std::move(executable);
  entry->operands = std::move(operands);
  entry->outputs = std::move(outputs);
  keep(std::move(entry));
}

void PreparedCall::prepare_deferred(std::string function, std::vector<hlo::Callee> callees,
                                    std::vector<Operand> operands, std::vector<Output> outputs,
                                    std::vector<hlo::TensorType> output_types,
                                    std::vector<std::vector<int64_t>> output_shapes) {
  if (!eligible_ || !deferred_) return;
  auto entry = std::make_shared<Entry>();
  entry->operands = std::move(operands);
  entry->outputs = std::move(outputs);
  entry->function = std::move(function);
  entry->callees = std::move(callees);
  entry->output_types = std::move(output_types);
  entry->output_shapes = std::move(output_shapes);
  keep(std::move(entry));
}

c10::Scalar PreparedCall::scalar_operand(const OperandSource& source) const {
  switch (source.kind) {
    case OperandSource::Kind::Offset: return c10::Scalar(tensors_[source.slot]->storage_offset());
    case OperandSource::Kind::Scalar: return *scalars_[source.slot];
    default: return tensors_[source.slot]->item();  // CpuItem
  }
}

bool PreparedCall::run_deferred(const Entry& entry, int device) {
  std::vector<runtime::DeferredGraph::Argument> arguments;
  arguments.reserve(entry.operands.size());
  for (const Operand& operand : entry.operands) {
    const OperandSource& source = operand.source;
    if (source.kind == OperandSource::Kind::Storage) {
      runtime::DeviceStorage* storage = device_storage(tensors_[source.slot]->storage());
      materialize(*storage);
      // The signature fixes the storage's size and element type, but a storage written as
      // another type since (a bitcast view) would be read as its new type: lower anew.
      if (operand.parameter.element != storage->element_type() ||
          operand.parameter.dims.size() != 1 || operand.parameter.dims[0] != storage->elements()) {
        return false;
      }
      arguments.push_back({storage, {}, operand.parameter, false});
      continue;
    }
    arguments.push_back(
        {nullptr, scalar_bytes(scalar_operand(source), source.type), operand.parameter, false});
  }
  std::vector<std::pair<runtime::DeviceStorage*, hlo::TensorType>> outputs;
  outputs.reserve(entry.outputs.size());
  for (size_t i = 0; i < entry.outputs.size(); ++i) {
    outputs.emplace_back(device_storage(tensors_[entry.outputs[i].slot]->storage()),
                         entry.output_types[i]);
  }
  translating_out_of_memory(static_cast<c10::DeviceIndex>(device), [&] {
    runtime::DeferredGraph& graph = runtime::Runtime::get().deferred_graph(device);
    int64_t pending =
        graph.record(entry.function, arguments, outputs, entry.callees, entry.output_shapes);
    runtime::metrics().count_prepared_record(op_);
    if (pending >= defer_max_ops()) graph.flush();
  });
  return true;
}

bool PreparedCall::run() {
  if (!eligible_) return false;
  std::shared_ptr<const Entry> entry = table().find(signature_);
  if (entry == nullptr) return false;
  int device = -1;
  for (const at::Tensor* t : tensors_) {
    if (t != nullptr && t->defined() && !t->is_cpu()) {
      device = t->device().index();
      break;
    }
  }
  if (device < 0) return false;
  if (deferred_) return run_deferred(*entry, device);
  std::shared_ptr<pjrt::Executable> executable = entry->executable.lock();
  if (executable == nullptr) return false;
  translating_out_of_memory(static_cast<c10::DeviceIndex>(device), [&] {
    std::vector<pjrt::BufferPtr> inputs;
    inputs.reserve(entry->operands.size());
    for (const Operand& operand : entry->operands) {
      const OperandSource& source = operand.source;
      if (source.kind == OperandSource::Kind::Storage) {
        runtime::DeviceStorage* storage = device_storage(tensors_[source.slot]->storage());
        materialize(*storage);
        inputs.push_back(storage->buffer());
        continue;
      }
      inputs.push_back(upload_operand(scalar_bytes(scalar_operand(source), source.type),
                                      source.type, operand.dims, device));
    }
    size_t bytes = 0;
    for (const at::Tensor* t : tensors_) {
      if (t != nullptr && t->defined() && !t->is_cpu()) bytes += t->storage().nbytes();
    }
    std::vector<pjrt::BufferPtr> outputs =
        launch_op(*executable, std::move(inputs), device, op_, /*launch_id=*/0, bytes);
    runtime::metrics().count_prepared_run(op_);
    for (size_t i = 0; i < entry->outputs.size(); ++i) {
      device_storage(tensors_[entry->outputs[i].slot]->storage())
          ->set_buffer(outputs[i], static_cast<hlo::ElementType>(entry->outputs[i].element_type));
    }
    runtime::Runtime::get().track(outputs);
  });
  return true;
}

}  // namespace tpu::aten
