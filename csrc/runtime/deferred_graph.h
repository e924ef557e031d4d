#pragma once
// The pending graph of the defer_and_fuse eager mode, one per device.
//
// Each eager op is still built as its own small program; instead of running it,
// the op is recorded as a call of that program (as a private function) from one
// growing @main. Storages written by a recorded op become *pending*: their value
// is an SSA name of @main. flush() compiles the whole graph as one program (XLA
// inlines the calls and fuses across ops), runs it, and resolves every pending
// storage that is still alive into a buffer; values of storages freed before the
// flush are never computed.
//
// The text of @main depends only on the sequence of ops and their metadata (never
// on scalar values, which travel as run-time operands), so a loop that records the
// same ops every step reuses one compiled program. A flush whose recorded structure
// (the calls, in the form record() keeps them, and which op functions they call) equals
// an earlier flush's runs that flush's executable without building the program's text.
//
// A graph is cut early in one case: a loop that waits for the device every step (reads
// its loss) leaves the device idle while the host records the next step. When the thread
// that records a graph waited for the device before, the graph runs what it holds as soon
// as another thread starts recording into it (the autograd engine's device thread, at
// backward()), so the device computes the forward while the host records the backward.
// A loop that never waits keeps one graph per step.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "hlo/builder.h"
#include "hlo/types.h"
#include "pjrt/buffer.h"
#include "pjrt/event.h"
#include "pjrt/executable.h"

namespace tpu::runtime {

class DeviceStorage;

class DeferredGraph {
 public:
  // An argument of a recorded op: a storage's whole 1-D contents, or a host value
  // (a scalar or random key) passed at run time.
  struct Argument {
    DeviceStorage* storage = nullptr;
    std::vector<unsigned char> bytes;  // host value, when storage is null
    hlo::TensorType type;              // the op function's parameter type
    bool random_key = false;           // bytes are a random key (seed, offset)
  };

  // What one flush compiled and ran, kept so that a caller who knows the next graph
  // is the same (torch.compile's replay, see aten/graph_replay.h) can run its program
  // again on new operands without recording. Storage and buffer pointers identify
  // what the recorded graph read and wrote; they are valid only right after the flush.
  struct Recording {
    std::shared_ptr<pjrt::Executable> executable;
    std::vector<PJRT_Buffer*> parameters;  // buffer operands, in parameter order
    std::vector<int> donated_to;           // per parameter: the output it aliases, or -1
    // Host operands: one packed operand per element type, in parameter order after
    // the buffers, and where the random keys lie in them (group, byte offset).
    std::vector<std::pair<hlo::ElementType, std::vector<unsigned char>>> host_groups;
    std::vector<std::pair<size_t, size_t>> random_keys;
    std::vector<DeviceStorage*> outputs;  // storages the program's results resolved
    std::vector<hlo::ElementType> output_types;
    std::vector<std::pair<hlo::TensorType, std::function<void(const std::vector<unsigned char>&)>>>
        checks;  // deferred checks, results after the outputs
    int64_t ops = 0;
    bool complete = false;  // the flush ran and may be replayed (no collectives)
  };

  explicit DeferredGraph(int device) : device_(device) {}
  ~DeferredGraph();
  DeferredGraph(const DeferredGraph&) = delete;
  DeferredGraph& operator=(const DeferredGraph&) = delete;

  // Records a call of `function` (a func.func text named "private @op", see
  // hlo::Builder::function_text) on `arguments`; its results become the pending
  // contents of `outputs` (1-D values of the given types), in order. Returns the
  // number of ops now pending. `callees` are the functions `function` calls (see
  // hlo::Builder::call); the graph's module holds each of them once. `shapes`, where
  // given, are the shapes the function flattened its results from (empty: unknown): a
  // result still pending at the flush is returned in that shape (its bytes are the same),
  // so XLA need not fuse its producer into a flattening (on XLA:CPU such a fusion is a
  // second copy of the producer, computed with per-element index arithmetic). Only
  // XLA:CPU takes a buffer of another shape but the same size as a 1-D parameter.
  int64_t record(const std::string& function, const std::vector<Argument>& arguments,
                 const std::vector<std::pair<DeviceStorage*, hlo::TensorType>>& outputs,
                 const std::vector<hlo::Callee>& callees = {},
                 const std::vector<std::vector<int64_t>>& shapes = {});

  // `on_result` gets the bytes of `storage`'s current (pending) value once the graph
  // has run, and may throw: deferred checks, such as index bounds, raise there. The
  // bytes are copied back asynchronously, and checked at the next flush, download
  // or synchronize (raise_failed_checks), so a check never stalls the host. Runs at
  // once when the storage is not pending here.
  void check(DeviceStorage* storage,
             std::function<void(const std::vector<unsigned char>&)> on_result);

  // Compiles (once per structure) and runs the graph; resolves pending storages.
  void flush();
  // flush() for a caller that may not be this graph's user (torch_tpu.sync(), a mode
  // switch, another device's synchronize): skips a graph that another thread records
  // into or runs. With one thread per rank, a rank flushing another rank's graph would
  // split that rank's step into two programs, or, where it holds a collective, join
  // the collective in that rank's place (XLA runs a collective in the launching thread
  // until every rank joins) and wait for itself. The graph runs when its own thread
  // syncs or reads its results.
  void flush_if_free();

  // Collectives fused into the graph (spmd_safe): the graph then compiles replicated
  // with `compile_options` and runs with the launch id of its first collective. Every
  // rank records the same ops, so every rank's graph has the same text and id.
  void join_collective(const std::string& compile_options, int launch_id);
  // Whether the graph holds collectives compiled with options other than these (it
  // must run before one of these is recorded).
  bool holds_other_collectives(const std::string& compile_options);
  // The channel id of the next collective recorded: unique within the graph, and the
  // same from one step to the next, so a training step's graph is compiled once.
  int64_t next_channel();
  // Waits for the checks of graphs already run and raises the first that failed.
  void raise_failed_checks();
  // Raises the first failed check among those already back on the host, waiting
  // only for checks of graphs older than the last one run: a flush must not wait
  // for the previous graph to finish, or the host could not record the next step
  // while the device runs this one.
  void raise_finished_checks();

  // Called by a pending storage that is destroyed or overwritten from outside.
  void forget(DeviceStorage* storage);

  // The next flush that runs a program fills `into` (see Recording).
  void record_next_flush(std::shared_ptr<Recording> into);
  // Runs `recording`'s program again: `parameters` in place of the recorded buffers
  // (donated ones must be held by nobody else), `host_groups` in place of its host
  // operands. Returns its outputs, as the recording lists them; its checks raise as
  // a flush's do. The graph must hold no pending ops.
  std::vector<pjrt::BufferPtr> replay(
      const Recording& recording, std::vector<pjrt::BufferPtr> parameters,
      const std::vector<std::pair<hlo::ElementType, std::vector<unsigned char>>>& host_groups);
  int64_t pending_ops();

  // Called by a thread that waited for the device (a read of a device value, a
  // synchronize): marks the next graph this thread records into (see the cut above).
  // Thread-local, so that with one thread per rank a rank's wait marks only its own graph
  // and every rank cuts its step at the same op.
  static void note_host_wait();

 private:
  struct Value {
    std::string name;
    hlo::TensorType type;
    std::vector<int64_t> shape;  // a result's shape before flattening (see record())
  };
  struct Check {
    Value value;
    std::function<void(const std::vector<unsigned char>&)> on_result;
  };
  struct Download {  // a check's value on its way to the host
    pjrt::BufferPtr source;
    std::unique_ptr<std::vector<unsigned char>> bytes;
    std::unique_ptr<pjrt::Event> done;
    std::function<void(const std::vector<unsigned char>&)> on_result;
    int64_t graph = 0;  // which flush produced it
  };
  struct HostGroup {  // host values of one element type, packed in one operand
    std::vector<unsigned char> bytes;
    std::string lines;  // slices of the group's parameter, one per host value
  };

  // Checks every download (waiting for them) or only those back or from graphs older
  // than the last one run; raises the first that failed.
  void raise_checks(bool wait_for_all);
  // Waits (without holding the lock) until fewer than two graphs are in flight.
  void wait_for_room();
  Value input(DeviceStorage* storage, const hlo::TensorType& type);
  Value host_input(const Argument& argument);
  std::string build_text(const std::vector<Value>& results,
                         const std::vector<int>& donated_to) const;
  // What build_text's result depends on, in a form much cheaper to build: the calls as
  // recorded, the op functions by id, the operand types, host groups, results and donations.
  std::string structure_key(const std::vector<Value>& results,
                            const std::vector<int>& donated_to) const;
  // The executable of a program built from an equal structure, or null.
  std::shared_ptr<pjrt::Executable> remembered(const std::string& structure);
  void remember(std::string structure, const std::shared_ptr<pjrt::Executable>& executable);
  // Runs `executable` on `buffers` and the host operands; books the run (profiler,
  // metrics, retirement, graphs in flight) and the downloads of its `checks`, whose
  // values follow the first `check_base` outputs. Holds the lock.
  std::vector<pjrt::BufferPtr> execute(
      pjrt::Executable& executable, std::vector<pjrt::BufferPtr> buffers,
      const std::vector<std::pair<hlo::ElementType, const std::vector<unsigned char>*>>& host,
      int64_t ops, int launch_id);
  void download_checks(
      const std::vector<pjrt::BufferPtr>& outputs, size_t check_base,
      std::vector<
          std::pair<hlo::TensorType, std::function<void(const std::vector<unsigned char>&)>>>
          checks);
  void reset();
  // The early cut: runs the pending ops when the calling thread is not the one that has
  // recorded them, that thread waited for the device before (since the last cut), and the
  // graph holds no collective (every rank must cut at the same op) nor a compiled graph's
  // record.
  void cut_after_host_wait();

  std::recursive_mutex mutex_;
  int device_;
  // Op function texts seen by this device's graphs: text -> id, and id -> text.
  std::unordered_map<std::string, int> function_ids_;
  std::vector<const std::string*> function_texts_;
  // This graph's functions in order of first use (ids), and each id's place in it (-1: unused).
  std::vector<int> used_functions_;
  std::vector<int> local_functions_;
  std::string calls_;
  // Functions the recorded ops call, each once, in order of first use.
  std::vector<hlo::Callee> callees_;
  int64_t ops_ = 0;
  int next_value_ = 0;
  // Buffer operands, deduplicated by buffer.
  std::vector<pjrt::BufferPtr> buffers_;
  std::vector<hlo::TensorType> buffer_types_;
  std::unordered_map<PJRT_Buffer*, int> buffer_index_;
  // Buffer operands by index whose storage this graph overwrote: flush donates each to the
  // value written over it where it can (see flush).
  std::unordered_map<int, DeviceStorage*> overwritten_;
  std::map<hlo::ElementType, HostGroup> host_groups_;
  std::vector<std::pair<hlo::ElementType, size_t>> random_keys_;  // (group, byte offset)
  std::shared_ptr<Recording> recording_;  // filled by the next flush, if set
  // Pending storages in order of first write (null once forgotten).
  std::vector<DeviceStorage*> pending_;
  std::unordered_map<DeviceStorage*, size_t> pending_index_;
  std::vector<Check> checks_;
  std::vector<Download> downloads_;
  // Structures of graphs run (see structure_key), with the program cache's generation
  // they were compiled in; weak: the program cache decides what stays loaded.
  struct Remembered {
    std::weak_ptr<pjrt::Executable> executable;
    uint64_t generation = 0;
  };
  std::unordered_map<std::string, Remembered> structures_;
  // Completion of the graphs run and not yet known to be done, oldest first. A flush
  // waits while two are in flight (one running, one queued), so the host runs ahead
  // of the device by at most that much and memory stays bounded.
  std::deque<std::unique_ptr<pjrt::Event>> in_flight_;
  int64_t graphs_run_ = 0;
  std::string compile_options_;              // empty: portable, no collectives
  std::atomic<std::thread::id> recorder_{};  // the thread recording this graph's ops
  // The last thread that recorded into this graph after waiting for the device; cleared
  // by the cut it allows. Kept across flushes: a loop may read its loss before the
  // optimizer step whose graph ends the step.
  std::atomic<std::thread::id> waiter_{};
  int launch_id_ = 0;
  int64_t channels_ = 0;
};

}  // namespace tpu::runtime
