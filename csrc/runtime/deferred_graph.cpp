#include "runtime/deferred_graph.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "runtime/buffer_type.h"
#include "runtime/device_buffer.h"
#include "runtime/metrics.h"
#include "runtime/program_trace.h"
#include "runtime/runtime.h"

namespace tpu::runtime {

namespace {

// The name every op function is built with; replaced by its graph-wide name.
constexpr const char* kOpFunction = "private @op(";

std::string host_group_name(hlo::ElementType type) {
  return "%host" + std::to_string(static_cast<int>(type));
}

std::string type_list(const std::vector<hlo::TensorType>& types) {
  std::string text;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) text += ", ";
    types[i].append_to(text);
  }
  return text;
}

// A failed event counts as done: whoever awaits it next gets the error.
bool is_done(const pjrt::Event& event) {
  try {
    return event.is_ready();
  } catch (const std::exception&) {
    return true;
  }
}

// Whether this thread waited for the device since it last recorded an op.
thread_local bool waited_for_device = false;

}  // namespace

void DeferredGraph::note_host_wait() { waited_for_device = true; }

void DeferredGraph::cut_after_host_wait() {
  const std::thread::id self = std::this_thread::get_id();
  if (waited_for_device) {
    waited_for_device = false;
    waiter_ = self;
  }
  const std::thread::id recorder = recorder_.load();
  if (recorder == std::thread::id() || recorder == self || waiter_.load() != recorder) return;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    if (!compile_options_.empty() || recording_ != nullptr) return;
    waiter_ = std::thread::id();
  }
  metrics().count_early_cut();
  flush();
}

DeferredGraph::~DeferredGraph() {
  for (DeviceStorage* storage : pending_) {
    if (storage != nullptr) storage->fail("the tpu runtime was shut down before this value ran");
  }
}

DeferredGraph::Value DeferredGraph::input(DeviceStorage* storage, const hlo::TensorType& type) {
  if (storage->pending_graph() == this) return Value{storage->pending_name(), type};
  const pjrt::BufferPtr& buffer = storage->buffer();
  if (buffer == nullptr) throw std::logic_error("a deferred op read a storage that holds nothing");
  auto [found, inserted] = buffer_index_.try_emplace(buffer->get(), buffers_.size());
  if (inserted) {
    buffers_.push_back(buffer);
    buffer_types_.push_back(type);
  }
  return Value{"%arg" + std::to_string(found->second), type};
}

DeferredGraph::Value DeferredGraph::host_input(const Argument& argument) {
  hlo::ElementType element = argument.type.element;
  HostGroup& group = host_groups_[element];
  int64_t offset = static_cast<int64_t>(group.bytes.size() / hlo::byte_size(element));
  int64_t count = argument.type.num_elements();
  if (argument.random_key) random_keys_.emplace_back(element, group.bytes.size());
  group.bytes.insert(group.bytes.end(), argument.bytes.begin(), argument.bytes.end());
  // The group's length is known only at flush, so its type is left as a marker.
  std::string name = "%h" + std::to_string(next_value_++);
  hlo::TensorType flat{element, {count}};
  std::string& lines = group.lines;
  lines += "    ";
  lines += name;
  lines += "_flat = \"stablehlo.slice\"(";
  lines += host_group_name(element);
  lines += ") {start_indices = array<i64: ";
  lines += std::to_string(offset);
  lines += ">, limit_indices = array<i64: ";
  lines += std::to_string(offset + count);
  lines += ">, strides = array<i64: 1>} : (@GROUP@) -> ";
  flat.append_to(lines);
  lines += "\n    ";
  lines += name;
  lines += " = \"stablehlo.reshape\"(";
  lines += name;
  lines += "_flat) : (";
  flat.append_to(lines);
  lines += ") -> ";
  argument.type.append_to(lines);
  lines += '\n';
  return Value{name, argument.type};
}

int64_t DeferredGraph::record(
    const std::string& function, const std::vector<Argument>& arguments,
    const std::vector<std::pair<DeviceStorage*, hlo::TensorType>>& outputs,
    const std::vector<hlo::Callee>& callees, const std::vector<std::vector<int64_t>>& shapes) {
  cut_after_host_wait();
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  recorder_ = std::this_thread::get_id();
  for (const hlo::Callee& callee : callees) {
    auto same = [&](const hlo::Callee& c) { return c.name == callee.name; };
    if (std::none_of(callees_.begin(), callees_.end(), same)) callees_.push_back(callee);
  }
  if (outputs.empty()) throw std::logic_error("a deferred op must write something");
  // Functions are numbered by first use in this graph, so the text depends only on
  // what this graph records; their texts are kept across graphs (no copy per graph).
  function_texts_.reserve(function_texts_.size() + 1);  // no throw after the insertion
  local_functions_.reserve(local_functions_.size() + 1);
  used_functions_.reserve(used_functions_.size() + 1);
  auto [known, is_new] = function_ids_.try_emplace(function, function_texts_.size());
  if (is_new) {
    if (function.find(kOpFunction) == std::string::npos) {
      function_ids_.erase(known);
      throw std::logic_error("a deferred op function is not @op");
    }
    function_texts_.push_back(&known->first);
    local_functions_.push_back(-1);
  }
  int& local = local_functions_[known->second];
  if (local < 0) {
    used_functions_.push_back(known->second);
    local = static_cast<int>(used_functions_.size()) - 1;
  }

  // The call's line is appended piece by piece: this runs for every recorded op.
  std::string names;
  std::string argument_types;
  for (const Argument& argument : arguments) {
    Value value =
        argument.storage != nullptr ? input(argument.storage, argument.type) : host_input(argument);
    if (!names.empty()) {
      names += ", ";
      argument_types += ", ";
    }
    names += value.name;
    argument.type.append_to(argument_types);
  }
  std::string call = "%c" + std::to_string(next_value_++);
  calls_ += "    ";
  calls_ += call;
  if (outputs.size() != 1) {
    calls_ += ':';
    calls_ += std::to_string(outputs.size());
  }
  calls_ += " = \"func.call\"(";
  calls_ += names;
  calls_ += ") {callee = @f";
  calls_ += std::to_string(local);
  calls_ += "} : (";
  calls_ += argument_types;
  calls_ += ") -> (";
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (i) calls_ += ", ";
    outputs[i].second.append_to(calls_);
  }
  calls_ += ")\n";
  for (size_t i = 0; i < outputs.size(); ++i) {
    DeviceStorage* storage = outputs[i].first;
    std::string name = outputs.size() == 1 ? call : call + "#" + std::to_string(i);
    if (pending_index_.count(storage) == 0) {
      pending_index_[storage] = pending_.size();
      pending_.push_back(storage);
      auto operand = buffer_index_.find(storage->held_buffer());
      if (operand != buffer_index_.end()) overwritten_[operand->second] = storage;
    }
    static const std::vector<int64_t> kUnknown;
    storage->set_pending(this, std::move(name), outputs[i].second.element,
                         i < shapes.size() ? shapes[i] : kUnknown);
  }
  return ++ops_;
}

void DeferredGraph::check(DeviceStorage* storage,
                          std::function<void(const std::vector<unsigned char>&)> on_result) {
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  if (storage->pending_graph() != this) {
    lock.unlock();
    std::vector<unsigned char> bytes(storage->nbytes());
    storage->buffer()->to_host(bytes.data(), bytes.size());
    on_result(bytes);
    return;
  }
  hlo::TensorType type{storage->element_type(), {storage->elements()}};
  checks_.push_back(Check{Value{storage->pending_name(), type}, std::move(on_result)});
}

void DeferredGraph::forget(DeviceStorage* storage) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  auto found = pending_index_.find(storage);
  if (found == pending_index_.end()) return;
  pending_[found->second] = nullptr;
  pending_index_.erase(found);
}

std::string DeferredGraph::build_text(const std::vector<Value>& results,
                                      const std::vector<int>& donated_to) const {
  std::string text = "module @torch_tpu {\n";
  for (size_t local = 0; local < used_functions_.size(); ++local) {
    const std::string& function = *function_texts_[used_functions_[local]];
    size_t at = function.find(kOpFunction);
    text.append(function, 0, at);
    text += "private @f";
    text += std::to_string(local);
    text += '(';
    text.append(function, at + std::strlen(kOpFunction), std::string::npos);
  }
  for (const hlo::Callee& callee : callees_) text += *callee.text;
  text += "  func.func public @main(";
  for (size_t i = 0; i < buffers_.size(); ++i) {
    text +=
        (i ? ", " : "") + std::string("%arg") + std::to_string(i) + ": " + buffer_types_[i].str();
    if (donated_to[i] >= 0) {
      text += " {tf.aliasing_output = " + std::to_string(donated_to[i]) + " : i32}";
    }
  }
  std::string host_lines;
  bool first = buffers_.empty();
  for (const auto& [element, group] : host_groups_) {
    hlo::TensorType type{element,
                         {static_cast<int64_t>(group.bytes.size() / hlo::byte_size(element))}};
    text += (first ? "" : ", ") + host_group_name(element) + ": " + type.str();
    first = false;
    std::string lines = group.lines;
    for (size_t at = lines.find("@GROUP@"); at != std::string::npos;
         at = lines.find("@GROUP@", at)) {
      lines.replace(at, 7, type.str());
    }
    host_lines += lines;
  }
  std::vector<hlo::TensorType> types;
  std::string names;
  std::string unflatten;
  for (size_t i = 0; i < results.size(); ++i) {
    const Value& result = results[i];
    names += names.empty() ? "" : ", ";
    if (result.shape.size() < 2) {
      types.push_back(result.type);
      names += result.name;
      continue;
    }
    // The result returned in its shape: see record().
    hlo::TensorType shaped{result.type.element, result.shape};
    const std::string name = "%out" + std::to_string(i);
    unflatten += "    " + name + " = \"stablehlo.reshape\"(" + result.name + ") : (" +
                 result.type.str() + ") -> " + shaped.str() + "\n";
    types.push_back(std::move(shaped));
    names += name;
  }
  std::string result_types = type_list(types);
  text += ") -> (" + result_types + ") {\n" + host_lines + calls_ + unflatten;
  text += "    \"func.return\"(" + names + ") : (" + result_types + ") -> ()\n  }\n}\n";
  return text;
}

std::string DeferredGraph::structure_key(const std::vector<Value>& results,
                                         const std::vector<int>& donated_to) const {
  std::string key;
  key.reserve(calls_.size() + 64 * (used_functions_.size() + buffers_.size() + results.size()));
  for (int id : used_functions_) {
    key += std::to_string(id);
    key += ',';
  }
  key += '\n';
  for (const hlo::Callee& callee : callees_) {
    key += callee.name;
    key += ',';
  }
  key += '\n';
  for (size_t i = 0; i < buffers_.size(); ++i) {
    buffer_types_[i].append_to(key);
    key += ':';
    key += std::to_string(donated_to[i]);
    key += ',';
  }
  key += '\n';
  for (const auto& [element, group] : host_groups_) {
    key += std::to_string(static_cast<int>(element));
    key += ':';
    key += std::to_string(group.bytes.size());
    key += '\n';
    key += group.lines;
  }
  key += '\n';
  for (const Value& result : results) {
    key += result.name;
    key += ':';
    result.type.append_to(key);
    for (int64_t d : result.shape) {
      key += '/';
      key += std::to_string(d);
    }
    key += ',';
  }
  key += '\n';
  key += calls_;
  return key;
}

std::shared_ptr<pjrt::Executable> DeferredGraph::remembered(const std::string& structure) {
  auto found = structures_.find(structure);
  if (found == structures_.end()) return nullptr;
  if (found->second.generation != Runtime::get().programs().generation()) return nullptr;
  return found->second.executable.lock();
}

void DeferredGraph::remember(std::string structure,
                             const std::shared_ptr<pjrt::Executable>& executable) {
  // A bound with no bookkeeping per hit: a loop has a few structures, and a forgotten
  // one costs one text build and program cache lookup.
  if (structures_.size() >= 256) structures_.clear();
  structures_[std::move(structure)] =
      Remembered{executable, Runtime::get().programs().generation()};
}

void DeferredGraph::raise_failed_checks() { raise_checks(/*wait_for_all=*/true); }

void DeferredGraph::raise_finished_checks() { raise_checks(/*wait_for_all=*/false); }

void DeferredGraph::raise_checks(bool wait_for_all) {
  std::vector<Download> finished;
  {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    std::vector<Download> pending;
    for (Download& download : downloads_) {
      bool take = wait_for_all || download.graph < graphs_run_ || is_done(*download.done);
      (take ? finished : pending).push_back(std::move(download));
    }
    downloads_.swap(pending);
  }
  std::exception_ptr first;
  for (Download& download : finished) {
    try {
      download.done->await();
      download.on_result(*download.bytes);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

void DeferredGraph::wait_for_room() {
  for (;;) {
    std::unique_ptr<pjrt::Event> oldest;
    {
      std::lock_guard<std::recursive_mutex> lock(mutex_);
      while (!in_flight_.empty() && is_done(*in_flight_.front())) in_flight_.pop_front();
      if (in_flight_.size() < 2) return;
      oldest = std::move(in_flight_.front());
      in_flight_.pop_front();
    }
    try {
      oldest->await();  // without the lock: other threads may record or free meanwhile
    } catch (const std::exception&) {
      // That graph's failure is raised where its values are used.
    }
  }
}

void DeferredGraph::flush() {
  wait_for_room();
  raise_finished_checks();
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  std::vector<DeviceStorage*> live;
  std::vector<Value> results;
  for (DeviceStorage* storage : pending_) {
    if (storage == nullptr) continue;
    live.push_back(storage);
    results.push_back(Value{storage->pending_name(),
                            hlo::TensorType{storage->element_type(), {storage->elements()}},
                            storage->pending_shape()});
  }
  for (const Check& check : checks_) results.push_back(check.value);
  if (results.empty()) {
    reset();
    return;
  }

  // An operand buffer nobody else holds (its storage was overwritten or freed here) is donated
  // to an output of the same type, so memory stays flat: to the value written over it where
  // that has its type, else to the first free output of the type. Donating a buffer to a value
  // computed while it is still read (a parameter's buffer to its gradient, read again by the
  // optimizer's update) makes XLA copy it first: matching by type alone cost the GPT training
  // step 100 such copies.
  std::vector<int> donated_to(buffers_.size(), -1);
  std::vector<bool> taken(results.size(), false);
  auto same_type = [&](size_t i, size_t j) {
    return results[j].type.element == buffer_types_[i].element &&
           results[j].type.dims == buffer_types_[i].dims;
  };
  std::unordered_map<DeviceStorage*, size_t> live_index;
  if (!overwritten_.empty()) {
    for (size_t j = 0; j < live.size(); ++j) live_index[live[j]] = j;
  }
  for (const auto& [i, storage] : overwritten_) {
    auto found = live_index.find(storage);
    if (buffers_[i].use_count() != 1 || found == live_index.end()) continue;
    size_t j = found->second;
    if (!taken[j] && same_type(i, j)) {
      donated_to[i] = static_cast<int>(j);
      taken[j] = true;
    }
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    if (donated_to[i] >= 0 || buffers_[i].use_count() != 1) continue;
    for (size_t j = 0; j < live.size(); ++j) {
      if (!taken[j] && same_type(i, j)) {
        donated_to[i] = static_cast<int>(j);
        taken[j] = true;
        break;
      }
    }
  }

  std::vector<std::pair<hlo::TensorType, std::function<void(const std::vector<unsigned char>&)>>>
      checks;
  for (Check& check : checks_) checks.emplace_back(check.value.type, std::move(check.on_result));
  std::shared_ptr<Recording> recording = std::move(recording_);
  std::vector<pjrt::BufferPtr> outputs;
  try {
    Runtime& runtime = Runtime::get();
    std::shared_ptr<pjrt::Executable> executable;
    if (compile_options_.empty()) {
      std::string structure = structure_key(results, donated_to);
      executable = remembered(structure);
      if (executable != nullptr) {
        metrics().count_fused_reuse();
      } else {
        executable = runtime.programs().get(build_text(results, donated_to), "fused graph",
                                            ProgramKind::Graph);
        remember(std::move(structure), executable);
      }
    } else {
      executable =
          runtime.programs().get(build_text(results, donated_to), "fused graph", compile_options_);
    }
    if (recording != nullptr && compile_options_.empty()) {
      // A collective's launch id changes every step: such graphs are not replayed.
      recording->executable = executable;
      for (const pjrt::BufferPtr& buffer : buffers_) recording->parameters.push_back(buffer->get());
      recording->donated_to = donated_to;
      std::map<hlo::ElementType, size_t> group_index;
      for (const auto& [element, group] : host_groups_) {
        group_index[element] = recording->host_groups.size();
        recording->host_groups.emplace_back(element, group.bytes);
      }
      for (const auto& [element, offset] : random_keys_)
        recording->random_keys.emplace_back(group_index.at(element), offset);
      recording->outputs = live;
      for (size_t i = 0; i < live.size(); ++i)
        recording->output_types.push_back(results[i].type.element);
      recording->checks = checks;
      recording->ops = ops_;
    }
    std::vector<std::pair<hlo::ElementType, const std::vector<unsigned char>*>> host;
    for (const auto& [element, group] : host_groups_) host.emplace_back(element, &group.bytes);
    // Donated buffers are consumed by the run: execute() takes our references.
    outputs = execute(*executable, std::move(buffers_), host, ops_, launch_id_);
  } catch (const std::exception& e) {
    std::string error =
        std::string("a deferred tpu graph of ") + std::to_string(ops_) + " ops failed: " + e.what();
    for (DeviceStorage* storage : live) storage->fail(error);
    reset();
    throw;
  }
  for (size_t i = 0; i < live.size(); ++i) live[i]->resolve(outputs[i], results[i].type.element);
  download_checks(outputs, live.size(), std::move(checks));
  if (recording != nullptr && compile_options_.empty()) recording->complete = true;
  reset();
  Runtime::get().track(outputs);
}

std::vector<pjrt::BufferPtr> DeferredGraph::execute(
    pjrt::Executable& executable, std::vector<pjrt::BufferPtr> buffers,
    const std::vector<std::pair<hlo::ElementType, const std::vector<unsigned char>*>>& host,
    int64_t ops, int launch_id) {
  Runtime& runtime = Runtime::get();
  const pjrt::Client& client = runtime.client();
  std::vector<PJRT_Buffer*> arguments;
  for (const pjrt::BufferPtr& buffer : buffers) arguments.push_back(buffer->get());
  for (const auto& [element, bytes] : host) {
    buffers.push_back(client.buffer_from_host(
        bytes->data(), buffer_type(element),
        {static_cast<int64_t>(bytes->size() / hlo::byte_size(element))}, device_));
    arguments.push_back(buffers.back()->get());
  }
  ProfiledRun profiled("tpu::fused_graph", device_, ops);  // torch.profiler
  std::vector<pjrt::BufferPtr> outputs =
      executable.execute(arguments, client.device(device_), launch_id);
  profiled.done(outputs);
  // Kept until the run is done (destroying even a donated one waits for the run).
  runtime.retire(std::move(buffers), outputs.front());
  metrics().count_execution();
  metrics().count_fused_graph(ops);
  try {
    in_flight_.push_back(outputs.front()->ready_event());
  } catch (const std::exception&) {
    // Not tracked: the graph ran; only the bound on graphs in flight is loosened.
  }
  return outputs;
}

void DeferredGraph::download_checks(
    const std::vector<pjrt::BufferPtr>& outputs, size_t check_base,
    std::vector<std::pair<hlo::TensorType, std::function<void(const std::vector<unsigned char>&)>>>
        checks) {
  for (size_t c = 0; c < checks.size(); ++c) {
    const hlo::TensorType& type = checks[c].first;
    auto bytes = std::make_unique<std::vector<unsigned char>>(type.num_elements() *
                                                              hlo::byte_size(type.element));
    const pjrt::BufferPtr& source = outputs[check_base + c];
    auto done = source->to_host_async(bytes->data(), bytes->size());
    downloads_.push_back(Download{source, std::move(bytes), std::move(done),
                                  std::move(checks[c].second), graphs_run_ + 1});
  }
  ++graphs_run_;
}

void DeferredGraph::record_next_flush(std::shared_ptr<Recording> into) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  recording_ = std::move(into);
}

int64_t DeferredGraph::pending_ops() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return ops_;
}

std::vector<pjrt::BufferPtr> DeferredGraph::replay(
    const Recording& recording, std::vector<pjrt::BufferPtr> parameters,
    const std::vector<std::pair<hlo::ElementType, std::vector<unsigned char>>>& host_groups) {
  wait_for_room();
  raise_finished_checks();
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (ops_ != 0) throw std::logic_error("a graph was replayed over pending ops");
  std::vector<std::pair<hlo::ElementType, const std::vector<unsigned char>*>> host;
  for (const auto& [element, bytes] : host_groups) host.emplace_back(element, &bytes);
  std::vector<pjrt::BufferPtr> outputs =
      execute(*recording.executable, std::move(parameters), host, recording.ops, 0);
  download_checks(outputs, recording.outputs.size(), recording.checks);
  Runtime::get().track(outputs);
  outputs.resize(recording.outputs.size());
  return outputs;
}

void DeferredGraph::flush_if_free() {
  const std::thread::id owner = recorder_.load();
  if (owner != std::thread::id() && owner != std::this_thread::get_id()) return;
  std::unique_lock<std::recursive_mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  const std::thread::id now = recorder_.load();
  if (now != std::thread::id() && now != std::this_thread::get_id()) return;
  flush();
}

void DeferredGraph::join_collective(const std::string& compile_options, int launch_id) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (compile_options_.empty()) {
    compile_options_ = compile_options;
    launch_id_ = launch_id;
  }
}

bool DeferredGraph::holds_other_collectives(const std::string& compile_options) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return !compile_options_.empty() && compile_options_ != compile_options;
}

int64_t DeferredGraph::next_channel() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return ++channels_;
}

void DeferredGraph::reset() {
  compile_options_.clear();
  recorder_ = std::thread::id();
  launch_id_ = 0;
  channels_ = 0;
  for (int id : used_functions_) local_functions_[id] = -1;
  used_functions_.clear();
  // Dynamic shapes add op texts every step; start over rather than grow for ever.
  if (function_ids_.size() > 16384) {
    function_ids_.clear();
    function_texts_.clear();
    local_functions_.clear();
    structures_.clear();  // they name functions by id
  }
  calls_.clear();
  callees_.clear();
  ops_ = 0;
  next_value_ = 0;
  buffers_.clear();
  buffer_types_.clear();
  buffer_index_.clear();
  overwritten_.clear();
  host_groups_.clear();
  random_keys_.clear();
  pending_.clear();
  pending_index_.clear();
  checks_.clear();
}

}  // namespace tpu::runtime
