#include "aten/graph_replay.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>
#include <unordered_map>

#include "aten/generator.h"
#include "aten/program.h"
#include "aten/storage.h"
#include "runtime/metrics.h"
#include "runtime/recompile_log.h"
#include "runtime/runtime.h"

namespace tpu::aten {

namespace {

constexpr c10::DispatchKeySet kTpuKeys(c10::DispatchKey::PrivateUse1);

runtime::DeviceStorage* storage_of(const at::Tensor& tensor) {
  return device_storage(tensor.storage());
}

std::string sizes_text(const std::vector<int64_t>& sizes) {
  return c10::str(c10::IntArrayRef(sizes));
}

// A tensor with `storage`'s data and the template's view of it.
at::Tensor view_of(c10::Storage storage, c10::ScalarType dtype, const std::vector<int64_t>& sizes,
                   const std::vector<int64_t>& strides, int64_t offset) {
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), kTpuKeys, caffe2::TypeMeta::fromScalarType(dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  return tensor;
}

}  // namespace

std::optional<std::vector<GraphReplay::ArgumentSignature>> GraphReplay::signature_of(
    const std::vector<GraphArgument>& args, c10::DeviceIndex* device, std::string* why) const {
  std::vector<ArgumentSignature> signature(args.size());
  std::unordered_map<const c10::StorageImpl*, int> storages;
  bool have_device = false;
  for (size_t i = 0; i < args.size(); ++i) {
    ArgumentSignature& s = signature[i];
    const at::Tensor& t = args[i].tensor;
    if (!t.defined()) {
      s.constant = args[i].constant;
      continue;
    }
    if (t.device().type() != c10::DeviceType::PrivateUse1) {
      // Optimizers keep their step counts on the CPU unless capturable=True (or fused).
      *why = "argument " + std::to_string(i) + " is a " + t.device().str() +
             " tensor (an optimizer keeps its step count on the CPU unless capturable=True)";
      return std::nullopt;
    }
    if (have_device && t.device().index() != *device) {
      *why = "its arguments are on more than one tpu device";
      return std::nullopt;
    }
    have_device = true;
    *device = t.device().index();
    s.is_tensor = true;
    s.dtype = t.scalar_type();
    s.sizes = t.sizes().vec();
    s.strides = t.strides().vec();
    s.offset = t.storage_offset();
    s.nbytes = t.storage().nbytes();
    auto [found, first] = storages.try_emplace(t.storage().unsafeGetStorageImpl(), int(i));
    if (!first) s.same_storage = found->second;
    if (runtime::DeviceStorage* storage = storage_of(t)) {
      s.has_buffer = storage->has_buffer();
      s.element = storage->element_type();
    }
  }
  if (!have_device) {
    *why = "it has no tpu tensor argument";
    return std::nullopt;
  }
  return signature;
}

bool GraphReplay::matches(const Plan& plan, const std::vector<GraphArgument>& args) const {
  if (args.size() != plan.signature.size()) return false;
  std::unordered_map<const c10::StorageImpl*, int> storages;
  storages.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgumentSignature& s = plan.signature[i];
    const at::Tensor& t = args[i].tensor;
    if (s.is_tensor != t.defined()) return false;
    if (!s.is_tensor) {
      if (s.constant != args[i].constant) return false;
      continue;
    }
    if (t.device().type() != c10::DeviceType::PrivateUse1 || t.device().index() != plan.device ||
        t.scalar_type() != s.dtype || t.storage_offset() != s.offset ||
        t.sizes() != c10::IntArrayRef(s.sizes) || t.strides() != c10::IntArrayRef(s.strides) ||
        t.storage().nbytes() != s.nbytes) {
      return false;
    }
    auto [found, first] = storages.try_emplace(t.storage().unsafeGetStorageImpl(), int(i));
    if ((first ? -1 : found->second) != s.same_storage) return false;
    runtime::DeviceStorage* storage = storage_of(t);
    bool has_buffer = storage != nullptr && storage->has_buffer();
    if (has_buffer != s.has_buffer || (has_buffer && storage->element_type() != s.element)) {
      return false;
    }
  }
  return true;
}

std::optional<std::vector<at::Tensor>> GraphReplay::run(const std::vector<GraphArgument>& args,
                                                        int* plan) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t p = plans_.size(); p-- > 0;) {
    if (!matches(plans_[p], args)) continue;
    runtime::DeferredGraph& graph = runtime::Runtime::get().deferred_graph(plans_[p].device);
    if (graph.pending_ops() != 0) graph.flush_if_free();
    if (graph.pending_ops() != 0) return std::nullopt;  // another thread's ops: record instead
    std::optional<std::vector<at::Tensor>> outputs = replay(plans_[p], args);
    if (!outputs) continue;  // an earlier plan may not donate that buffer
    *plan = static_cast<int>(p);
    return outputs;
  }
  return std::nullopt;
}

std::optional<std::vector<at::Tensor>> GraphReplay::replay(const Plan& plan,
                                                           const std::vector<GraphArgument>& args) {
  const runtime::DeferredGraph::Recording& recording = *plan.recording;
  c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, plan.device));
  std::vector<pjrt::BufferPtr> parameters;
  parameters.reserve(plan.parameter_arguments.size());
  for (int a : plan.parameter_arguments) {
    runtime::DeviceStorage* storage = storage_of(args[a].tensor);
    materialize(*storage);
    parameters.push_back(storage->buffer());
  }
  // Arguments the program overwrites let go of their buffers, which the program may
  // consume (donation); they get them back if it fails to run.
  std::vector<std::pair<runtime::DeviceStorage*, pjrt::BufferPtr>> released;
  for (size_t r = 0; r < plan.result_arguments.size(); ++r) {
    int a = plan.result_arguments[r];
    if (a < 0) continue;
    runtime::DeviceStorage* storage = storage_of(args[a].tensor);
    released.emplace_back(storage, storage->buffer());
    storage->set_buffer(nullptr, storage->element_type());
  }
  auto restore = [&] {
    for (auto& [storage, buffer] : released) storage->set_buffer(buffer, storage->element_type());
  };
  auto held_elsewhere = [&] {
    for (size_t i = 0; i < parameters.size(); ++i) {
      // `released` holds one more reference to an overwritten argument's buffer.
      if (recording.donated_to[i] >= 0 && parameters[i].use_count() > 2) return true;
    }
    return false;
  };
  // An execution that read the buffer may still hold it: one that has finished (small
  // ones are let go in batches), or one still running, such as the backward whose
  // gradients this graph reads. PJRT orders this graph after them, so they need not keep
  // it; a buffer held by anything else (another tensor) is not donated: record instead.
  if (held_elsewhere()) {
    std::vector<const pjrt::Buffer*> donated;
    for (size_t i = 0; i < parameters.size(); ++i) {
      if (recording.donated_to[i] >= 0) donated.push_back(parameters[i].get());
    }
    runtime::Runtime::get().drop_retired_references(donated);
    if (held_elsewhere()) {
      restore();
      return std::nullopt;
    }
  }
  for (auto& entry : released) entry.second.reset();

  auto host_groups = recording.host_groups;
  for (size_t k = 0; k < recording.random_keys.size(); ++k) {
    const auto& [group, offset] = recording.random_keys[k];
    std::array<uint64_t, 2> key = next_random_key(plan.generators[k], plan.device);
    std::memcpy(host_groups[group].second.data() + offset, key.data(), sizeof key);
  }
  std::vector<pjrt::BufferPtr> results;
  try {
    results = runtime::Runtime::get()
                  .deferred_graph(plan.device)
                  .replay(recording, std::move(parameters), host_groups);
  } catch (const std::exception& e) {
    std::string error = "a replayed tpu graph (" + label_ + ", " + std::to_string(recording.ops) +
                        " ops) failed: " + e.what();
    for (auto& entry : released) entry.first->fail(error);  // their old values are gone
    TORCH_CHECK(false, error);
  }

  std::vector<c10::Storage> new_storages(results.size());
  for (size_t r = 0; r < results.size(); ++r) {
    int a = plan.result_arguments[r];
    if (a >= 0) {
      storage_of(args[a].tensor)->set_buffer(results[r], recording.output_types[r]);
      continue;
    }
    new_storages[r] = c10::Storage(c10::Storage::use_byte_size_t(), plan.result_nbytes[r],
                                   allocator(), /*resizable=*/true);
    device_storage(new_storages[r])->set_buffer(results[r], recording.output_types[r]);
  }
  std::vector<at::Tensor> outputs;
  outputs.reserve(plan.outputs.size());
  for (const OutputTemplate& out : plan.outputs) {
    switch (out.kind) {
      case OutputTemplate::NotTensor: outputs.emplace_back(); break;
      case OutputTemplate::Empty:
        outputs.push_back(at::detail::empty_strided_generic(out.sizes, out.strides, allocator(),
                                                            kTpuKeys, out.dtype));
        break;
      case OutputTemplate::Argument:
        outputs.push_back(view_of(args[out.source].tensor.storage(), out.dtype, out.sizes,
                                  out.strides, out.offset));
        break;
      case OutputTemplate::Result:
        outputs.push_back(
            view_of(new_storages[out.source], out.dtype, out.sizes, out.strides, out.offset));
        break;
    }
  }
  return outputs;
}

void GraphReplay::begin(const std::vector<GraphArgument>& args) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (watcher_ != std::thread::id()) return;  // another thread is recording this graph
  watcher_ = std::this_thread::get_id();
  watch_ = Watch{};
  runtime::Runtime& rt = runtime::Runtime::get();
  rt.flush_deferred();
  std::optional<std::vector<ArgumentSignature>> signature =
      signature_of(args, &watch_.device, &watch_.why);
  if (!signature) return;
  if (plans_.size() >= kMaxPlans) {
    watch_.why = "it met more than " + std::to_string(kMaxPlans) + " input signatures";
    return;
  }
  runtime::DeferredGraph& graph = rt.deferred_graph(watch_.device);
  if (graph.pending_ops() != 0) {
    watch_.why = "another thread records into its device's graph";
    return;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].tensor.defined()) continue;
    runtime::DeviceStorage* storage = storage_of(args[i].tensor);
    if (storage == nullptr || storage->pending_graph() != nullptr || !storage->has_buffer())
      continue;
    watch_.buffers.emplace_back(storage->buffer()->get(), int(i));
  }
  watch_.signature = std::move(*signature);
  watch_.recording = std::make_shared<runtime::DeferredGraph::Recording>();
  graph.record_next_flush(watch_.recording);
  log_random_keys(&watch_.generators);
  runtime::Activity activity = runtime::metrics().activity();
  watch_.executions = activity.executions;
  watch_.transfers = activity.transfers;
  watch_.fallbacks = activity.fallbacks;
  watch_.recordable = true;
  for (const GraphArgument& arg : args) {
    if (arg.tensor.defined() && !arg.tensor.is_cpu()) {
      watch_.storages.push_back(storage_of(arg.tensor));
    }
  }
  set_compiled_graph_inputs(&watch_.storages);
}

void GraphReplay::abandon() {
  set_compiled_graph_inputs(nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  if (watcher_ != std::this_thread::get_id()) return;
  watcher_ = std::thread::id();
  log_random_keys(nullptr);
  if (watch_.recordable)
    runtime::Runtime::get().deferred_graph(watch_.device).record_next_flush(nullptr);
  watch_ = Watch{};
}

int GraphReplay::finish(const std::vector<GraphArgument>& args,
                        const std::vector<at::Tensor>& outputs, std::string* why) {
  set_compiled_graph_inputs(nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  if (watcher_ != std::this_thread::get_id()) {
    *why = "another thread was recording it";
    return -1;
  }
  watcher_ = std::thread::id();
  log_random_keys(nullptr);
  Watch watch = std::move(watch_);
  watch_ = Watch{};
  *why = watch.why;
  if (!watch.recordable) return -1;
  runtime::Runtime::get().deferred_graph(watch.device).record_next_flush(nullptr);
  runtime::Activity activity = runtime::metrics().activity();
  const runtime::DeferredGraph::Recording& recording = *watch.recording;
  if (activity.fallbacks != watch.fallbacks) {
    *why = "an op fell back to the CPU";
  } else if (activity.transfers != watch.transfers) {
    *why = "it moved data between the host and the device";
  } else if (activity.executions != watch.executions + 1 || !recording.complete) {
    *why = "it ran " + std::to_string(activity.executions - watch.executions) +
           " programs, not one fused graph";
  } else if (recording.random_keys.size() != watch.generators.size()) {
    *why = "it drew random numbers outside the graph";
  }
  if (!why->empty()) return -1;
  c10::DeviceIndex device = 0;
  std::optional<std::vector<ArgumentSignature>> after = signature_of(args, &device, why);
  if (!after) return -1;
  for (size_t i = 0; i < after->size(); ++i) {
    const ArgumentSignature& a = (*after)[i];
    const ArgumentSignature& b = watch.signature[i];
    if (a.sizes != b.sizes || a.strides != b.strides || a.offset != b.offset ||
        a.nbytes != b.nbytes || a.same_storage != b.same_storage) {
      *why = "it changes the shape or storage of argument " + std::to_string(i);
      return -1;
    }
  }

  Plan plan;
  plan.signature = std::move(watch.signature);
  plan.device = watch.device;
  plan.generators = std::move(watch.generators);
  std::unordered_map<PJRT_Buffer*, int> argument_buffers;
  std::unordered_map<const runtime::DeviceStorage*, int> argument_storages;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].tensor.defined()) continue;
    runtime::DeviceStorage* storage = storage_of(args[i].tensor);
    if (storage == nullptr) continue;
    argument_storages.try_emplace(storage, int(i));
  }
  // The buffers the program read were the arguments' buffers when the call began; the
  // arguments' storages still hold them unless the program overwrote them, and then
  // the result is theirs. Compare with the buffers the arguments hold now and had.
  std::unordered_map<const runtime::DeviceStorage*, int> result_index;
  for (size_t r = 0; r < recording.outputs.size(); ++r) result_index[recording.outputs[r]] = int(r);
  plan.result_arguments.assign(recording.outputs.size(), -1);
  plan.result_nbytes.assign(recording.outputs.size(), 0);
  for (const auto& [storage, a] : argument_storages) {
    auto written = result_index.find(storage);
    if (written != result_index.end()) plan.result_arguments[written->second] = a;
  }
  plan.recording = watch.recording;
  for (const auto& [buffer, a] : watch.buffers) argument_buffers.emplace(buffer, a);
  for (PJRT_Buffer* buffer : recording.parameters) {
    auto found = argument_buffers.find(buffer);
    if (found == argument_buffers.end()) {
      *why = "it reads a tensor that is not one of its arguments";
      return -1;
    }
    plan.parameter_arguments.push_back(found->second);
  }
  std::vector<bool> returned(recording.outputs.size(), false);
  for (size_t j = 0; j < outputs.size(); ++j) {
    OutputTemplate out;
    const at::Tensor& t = outputs[j];
    if (t.defined()) {
      if (t.device().type() != c10::DeviceType::PrivateUse1 || t.device().index() != plan.device) {
        *why = "output " + std::to_string(j) + " is not on its tpu device";
        return -1;
      }
      out.dtype = t.scalar_type();
      out.sizes = t.sizes().vec();
      out.strides = t.strides().vec();
      out.offset = t.storage_offset();
      runtime::DeviceStorage* storage = storage_of(t);
      auto argument = storage ? argument_storages.find(storage) : argument_storages.end();
      auto result = storage ? result_index.find(storage) : result_index.end();
      // A storage nothing ever wrote reads as zeros, as a new empty one does (the unused
      // random-seed tensors fused attention returns for its backward).
      const bool never_written = storage != nullptr && !storage->has_buffer() &&
                                 argument == argument_storages.end() &&
                                 result == result_index.end() && t.storage_offset() == 0 &&
                                 t.is_contiguous() && t.storage().nbytes() == t.nbytes();
      if (storage == nullptr || never_written) {
        out.kind = OutputTemplate::Empty;
      } else if (argument != argument_storages.end()) {
        out.kind = OutputTemplate::Argument;
        out.source = argument->second;
      } else if (result != result_index.end()) {
        out.kind = OutputTemplate::Result;
        out.source = result->second;
        returned[result->second] = true;
        plan.result_nbytes[result->second] = t.storage().nbytes();
      } else {
        *why = "output " + std::to_string(j) + " was not computed by its program";
        return -1;
      }
    }
    plan.outputs.push_back(std::move(out));
  }
  for (size_t r = 0; r < returned.size(); ++r) {
    if (!returned[r] && plan.result_arguments[r] < 0) {
      *why = "it leaves a value alive that is neither an argument nor an output";
      return -1;
    }
  }
  if (runtime::RecompileLog::enabled() && !plans_.empty()) {
    runtime::RecompileLog::write("replay plan " + std::to_string(plans_.size() + 1) + " for " +
                                 label_ + ": " + explain_new_signature(plan.signature));
  }
  plans_.push_back(std::move(plan));
  return static_cast<int>(plans_.size()) - 1;
}

std::string GraphReplay::explain_new_signature(
    const std::vector<ArgumentSignature>& signature) const {
  const std::vector<ArgumentSignature>& last = plans_.back().signature;
  if (last.size() != signature.size()) return "a different number of arguments";
  for (size_t i = 0; i < signature.size(); ++i) {
    const ArgumentSignature& a = last[i];
    const ArgumentSignature& b = signature[i];
    std::string at = "argument " + std::to_string(i) + ": ";
    if (a.is_tensor != b.is_tensor || a.constant != b.constant)
      return at + "value " + a.constant + " -> " + b.constant;
    if (a.sizes != b.sizes)
      return at + "sizes " + sizes_text(a.sizes) + " -> " + sizes_text(b.sizes);
    if (a.dtype != b.dtype)
      return at + "dtype " + c10::toString(a.dtype) + " -> " + c10::toString(b.dtype);
    if (a.strides != b.strides)
      return at + "strides " + sizes_text(a.strides) + " -> " + sizes_text(b.strides);
    if (a.offset != b.offset)
      return at + "storage offset " + std::to_string(a.offset) + " -> " + std::to_string(b.offset);
    if (a.same_storage != b.same_storage) return at + "aliasing with other arguments";
    if (a.nbytes != b.nbytes || a.has_buffer != b.has_buffer || a.element != b.element)
      return at + "its storage";
  }
  return "the same signature (the earlier plan could not run)";
}

}  // namespace tpu::aten
