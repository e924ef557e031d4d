#pragma once
// The process-wide runtime: one PJRT plugin, its client and the program cache.
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pjrt/client.h"
#include "pjrt/event.h"
#include "runtime/constant_buffers.h"
#include "runtime/deferred_graph.h"
#include "runtime/host_transfers.h"
#include "runtime/job.h"
#include "runtime/program_cache.h"

namespace tpu::runtime {

class Runtime {
 public:
  // Loads the plugin at `plugin_path` and creates its client. Called once, by the
  // Python package (which does the discovery); later calls must name the same plugin.
  // `options` go to PJRT_Client_Create (see pjrt::CreateOption); a multi-process `job`
  // gives the client its key-value store and checks that every process loaded the
  // same platform.
  static Runtime& initialize(const std::string& plugin_path,
                             const std::vector<pjrt::CreateOption>& options = {},
                             JobProcess job = {});
  // Throws std::runtime_error if initialize() has not succeeded.
  static Runtime& get();
  static bool is_initialized();

  const pjrt::Client& client() const { return *client_; }
  const std::vector<pjrt::CreateOption>& client_options() const { return options_; }
  const JobProcess& job() const { return job_; }
  ProgramCache& programs() { return *programs_; }
  // Shared device buffers of small constant operands (see constant_buffers.h).
  ConstantBuffers& constants() { return *constants_; }
  int device_count() const { return client_->device_count(); }

  // Keeps `inputs` of an execution alive until `output` is computed. Destroying a
  // buffer that a running execution still reads blocks until it finishes, which
  // would make every dispatch synchronous; retired buffers go once it has.
  // `bytes` (the execution's operands and results, SIZE_MAX where unknown) decides
  // whether it may wait with a batch of small ones before it is checked.
  void retire(std::vector<pjrt::BufferPtr> inputs, const pjrt::BufferPtr& output,
              size_t bytes = SIZE_MAX);

  // Lets go of the inputs of executions that have finished (a batch of small ones is
  // otherwise checked only when it is full); true if any were let go. For a caller that
  // needs a buffer no finished execution holds (donation).
  bool release_finished_executions();
  // Waits for every execution whose inputs are still held, and lets go of them.
  void release_executions_when_finished();
  // Lets go of the references that unfinished executions' retired inputs hold to `buffers`,
  // which the caller is about to donate to a new execution: PJRT orders a donating
  // execution after every execution that reads the buffer, so the buffer needs no keeping
  // alive, and the caller need not wait for those executions (as a compiled optimizer step
  // would for the backward that reads its parameters).
  void drop_retired_references(const std::vector<const pjrt::Buffer*>& buffers);
  // How many references drop_retired_references has let go of in this process.
  int64_t retired_references_dropped() const { return retired_references_dropped_.load(); }

  // Remembers buffers still being computed, so synchronize() can wait for them.
  void track(const std::vector<pjrt::BufferPtr>& pending);
  // Runs every pending deferred graph, then blocks until every tracked
  // computation has finished; throws the first failure.
  void synchronize();
  // The tracked buffers still alive (some may have finished): what an event waits for.
  std::vector<pjrt::BufferPtr> pending();
  // Copies with host memory still in flight (non_blocking with pinned memory);
  // synchronize() waits for their downloads too.
  HostTransfers& host_transfers() { return host_transfers_; }

  // The defer_and_fuse graph of `device`.
  DeferredGraph& deferred_graph(int device) { return *graphs_.at(device); }
  // Runs every device's pending graph (without waiting for the results), except one
  // another thread is busy with (see DeferredGraph::flush_if_free).
  void flush_deferred();
  // Called where the host waited for the device (a read of a device value, synchronize):
  // raises the first failed check of the deferred graphs already run (waiting for them),
  // and notes the wait for defer_and_fuse's early cut (DeferredGraph::note_host_wait).
  void after_host_wait();

 private:
  Runtime(std::shared_ptr<pjrt::Plugin> plugin, const std::vector<pjrt::CreateOption>& options,
          JobProcess job);

  std::shared_ptr<pjrt::Plugin> plugin_;
  std::vector<pjrt::CreateOption> options_;
  JobProcess job_;
  std::unique_ptr<pjrt::Client> client_;
  std::unique_ptr<ProgramCache> programs_;
  std::unique_ptr<ConstantBuffers> constants_;
  std::vector<std::unique_ptr<DeferredGraph>> graphs_;
  std::mutex pending_mutex_;
  // Weak: a buffer nobody holds any more needs no waiting for.
  std::vector<std::weak_ptr<pjrt::Buffer>> pending_;
  struct Retired {
    std::vector<pjrt::BufferPtr> inputs;
    std::unique_ptr<pjrt::Event> done;   // null in a batch of small executions
    std::weak_ptr<pjrt::Buffer> output;  // where `done` comes from when it is needed
    size_t bytes;
  };
  // Moves the entries of finished executions to `released` (checking the newest one's
  // event first where `check_newest`). Called with pending_mutex_ held.
  void release_finished(bool check_newest, std::vector<Retired>* released);
  std::deque<Retired> retired_;
  HostTransfers host_transfers_;
  std::atomic<int64_t> retired_references_dropped_{0};
  // A batch of small executions: at most this many, holding at most this many bytes.
  static constexpr size_t kRetiredBatch = 16;
  static constexpr size_t kRetiredBatchBytes = size_t(1) << 20;
  size_t retired_bytes_ = 0;  // of retired_, each entry counted up to kRetiredBatchBytes + 1
};

}  // namespace tpu::runtime
