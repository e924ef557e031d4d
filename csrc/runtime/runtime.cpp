#include "runtime/runtime.h"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_set>

#include "pjrt/error.h"
#include "runtime/crash_report.h"
#include "runtime/host_heap.h"
#include "runtime/memory.h"
#include "runtime/xla_cpu_shortcuts.h"

namespace tpu::runtime {

namespace {
std::mutex init_mutex;
Runtime* instance = nullptr;  // intentionally leaked: plugins must outlive every buffer

// Waits for a run that only kept its inputs alive. A failed run's error belongs to its
// outputs: it is raised where they are read, or by synchronize() while they live; raising
// it here would raise it again after the user handled it (and its outputs are gone).
void wait_quietly(const pjrt::Event& done) {
  try {
    done.await();
  } catch (const pjrt::Error&) {
  }
}
}  // namespace

Runtime::Runtime(std::shared_ptr<pjrt::Plugin> plugin,
                 const std::vector<pjrt::CreateOption>& options, JobProcess job)
    : plugin_(std::move(plugin)),
      options_(options),
      job_(std::move(job)),
      client_(std::make_unique<pjrt::Client>(plugin_, options, job_.key_values)),
      programs_(std::make_unique<ProgramCache>(*client_)),
      constants_(std::make_unique<ConstantBuffers>(*client_)) {
  check_same_platform(job_, client_->platform_name() + " " + client_->platform_version());
  for (int i = 0; i < client_->device_count(); ++i) {
    graphs_.push_back(std::make_unique<DeferredGraph>(i));
    if (std::optional<int64_t> limit = client_->memory_limit(i)) {
      memory().set_capacity(i, *limit, "reported by the PJRT plugin");
    } else {
      // The CPU plugin's devices allocate from the host, and report no limit. Half of it:
      // XLA:CPU's temporaries (not counted here) and the process itself need the rest, and
      // a tensor past that raises OutOfMemoryError where all of it would have the kernel
      // kill the process.
      memory().set_capacity(i, host_physical_memory() / 2, "half the host's physical memory");
    }
  }
}

void Runtime::flush_deferred() {
  for (auto& graph : graphs_) graph->flush_if_free();
}

void Runtime::after_host_wait() {
  DeferredGraph::note_host_wait();
  for (auto& graph : graphs_) graph->raise_failed_checks();
}

Runtime& Runtime::initialize(const std::string& plugin_path,
                             const std::vector<pjrt::CreateOption>& options, JobProcess job) {
  std::lock_guard<std::mutex> lock(init_mutex);
  if (instance != nullptr) {
    if (instance->plugin_->path() != plugin_path) {
      throw std::runtime_error("torch_tpu is already using the PJRT plugin '" +
                               instance->plugin_->path() + "'; cannot switch to '" + plugin_path +
                               "' in the same process");
    }
    return *instance;
  }
  // Before the plugin loads: a fault on one of its threads then shows the native frames.
  install_crash_report();
  const bool tune_heap = host_heap_tuning_requested();  // a bad value fails before loading
  auto runtime = std::unique_ptr<Runtime>(
      new Runtime(pjrt::Plugin::load(plugin_path), options, std::move(job)));
  if (tune_heap && xla_cpu_shortcuts(runtime->client().platform_name())) {
    tune_host_heap_for_device_buffers();
  }
  instance = runtime.release();
  return *instance;
}

Runtime& Runtime::get() {
  if (instance == nullptr) {
    throw std::runtime_error("the tpu runtime is not initialized: import torch_tpu first");
  }
  return *instance;
}

void Runtime::track(const std::vector<pjrt::BufferPtr>& pending) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  pending_.insert(pending_.end(), pending.begin(), pending.end());
  // Bound the list in long loops that never synchronize: drop what has finished, in
  // place (a list rebuilt from empty grows through reallocations, each of which cost a
  // small op's dispatch as much again in malloc).
  if (pending_.size() > 512) {
    auto finished = [](const std::weak_ptr<pjrt::Buffer>& weak) {
      pjrt::BufferPtr buffer = weak.lock();
      return buffer == nullptr || buffer->is_deleted() || buffer->ready_event()->is_ready();
    };
    pending_.erase(std::remove_if(pending_.begin(), pending_.end(), finished), pending_.end());
  }
}

void Runtime::retire(std::vector<pjrt::BufferPtr> inputs, const pjrt::BufferPtr& output,
                     size_t bytes) {
  std::vector<Retired> released;  // destroyed outside the lock (a vector: no allocation if empty)
  std::lock_guard<std::mutex> lock(pending_mutex_);
  retired_bytes_ += std::min(bytes, kRetiredBatchBytes + 1);
  retired_.push_back(Retired{std::move(inputs), nullptr, output, bytes});
  // Small executions are checked a batch at a time: asking the plugin for an event costs
  // a small op about a tenth of its host time, and a batch holds little memory.
  release_finished(retired_.size() >= kRetiredBatch || retired_bytes_ > kRetiredBatchBytes,
                   &released);
}

bool Runtime::release_finished_executions() {
  std::vector<Retired> released;
  std::lock_guard<std::mutex> lock(pending_mutex_);
  release_finished(true, &released);
  return !released.empty();
}

void Runtime::release_executions_when_finished() {
  std::deque<Retired> retired;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    retired.swap(retired_);
    retired_bytes_ = 0;
  }
  for (Retired& r : retired) {
    if (!r.done) {
      if (pjrt::BufferPtr output = r.output.lock()) r.done = output->ready_event();
    }
    if (r.done) wait_quietly(*r.done);
  }
}

void Runtime::drop_retired_references(const std::vector<const pjrt::Buffer*>& buffers) {
  const std::unordered_set<const pjrt::Buffer*> given(buffers.begin(), buffers.end());
  std::vector<pjrt::BufferPtr> dropped;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(pending_mutex_);
  for (Retired& r : retired_) {
    auto donated = [&](const pjrt::BufferPtr& input) { return given.count(input.get()) != 0; };
    auto kept = std::stable_partition(r.inputs.begin(), r.inputs.end(),
                                      [&](const pjrt::BufferPtr& b) { return !donated(b); });
    retired_references_dropped_ += r.inputs.end() - kept;
    std::move(kept, r.inputs.end(), std::back_inserter(dropped));
    r.inputs.erase(kept, r.inputs.end());
  }
}

void Runtime::release_finished(bool check_newest, std::vector<Retired>* released) {
  if (check_newest && !retired_.empty()) {
    Retired& newest = retired_.back();
    if (!newest.done) {
      if (pjrt::BufferPtr output = newest.output.lock()) newest.done = output->ready_event();
    }
    if (newest.done && newest.done->is_ready()) {
      // Executions finish in order per device, so every earlier one has too (where that
      // does not hold, dropping an input a run still reads blocks until it finishes).
      released->assign(std::make_move_iterator(retired_.begin()),
                       std::make_move_iterator(retired_.end()));
      retired_.clear();
      retired_bytes_ = 0;
      return;
    }
  }
  // Release from the front while done, and bound the backlog in loops that never
  // synchronize. An entry of a batch has no event of its own until a check needs one: a
  // later entry's event releases it, or (when this call checks) its own.
  auto front_done = [&] {
    Retired& front = retired_.front();
    if (!front.done && check_newest) {
      pjrt::BufferPtr output = front.output.lock();
      // Its output is gone, so no event says when it ran: let go anyway (dropping an
      // input a run still reads only waits for that run).
      if (output == nullptr) return true;
      front.done = output->ready_event();
    }
    return front.done && front.done->is_ready();
  };
  while (!retired_.empty() && (retired_.size() > 1024 || front_done())) {
    if (retired_.front().done && !retired_.front().done->is_ready()) {
      wait_quietly(*retired_.front().done);
    }
    retired_bytes_ -= std::min(retired_.front().bytes, kRetiredBatchBytes + 1);
    released->push_back(std::move(retired_.front()));
    retired_.pop_front();
  }
}

void Runtime::synchronize() {
  flush_deferred();
  std::vector<std::weak_ptr<pjrt::Buffer>> waiting;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    waiting.swap(pending_);
  }
  std::deque<Retired> retired;
  for (auto& weak : waiting) {
    pjrt::BufferPtr buffer = weak.lock();
    // A donated buffer was consumed by a later run, which is waited for in its place.
    if (buffer != nullptr && !buffer->is_deleted()) buffer->ready_event()->await();
  }
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    retired.swap(retired_);
    retired_bytes_ = 0;
  }
  for (Retired& r : retired) {
    if (r.done) wait_quietly(*r.done);
  }
  host_transfers_.wait_for_downloads();
  after_host_wait();
}

std::vector<pjrt::BufferPtr> Runtime::pending() {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  std::vector<pjrt::BufferPtr> alive;
  for (auto& weak : pending_) {
    if (pjrt::BufferPtr buffer = weak.lock()) alive.push_back(std::move(buffer));
  }
  return alive;
}

bool Runtime::is_initialized() { return instance != nullptr; }

}  // namespace tpu::runtime
