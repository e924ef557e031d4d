#pragma once
// A Program is what a lowering writes into: it turns tpu tensors (storage + view
// metadata) into StableHLO values, collects the runtime operands, and on run()
// compiles (once per distinct program text) and enqueues the program, then swaps
// the results into the written storages.
//
//   Program p("aten::add.Tensor");
//   hlo::Value x = p.read(self, compute_type);
//   p.write(out, p.b().binary("add", x, y));
//   p.run();
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <array>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "aten/prepared_op.h"
#include "hlo/builder.h"
#include "runtime/device_buffer.h"
#include "runtime/strided.h"

namespace tpu::aten {

// Whether the plugin is XLA:CPU, whose device memory is host memory (cached).
bool on_xla_cpu();
// Whether this process takes the CPU plugin's speed shortcuts (runtime/xla_cpu_shortcuts.h):
// on XLA:CPU unless TORCH_TPU_XLA_CPU_SHORTCUTS=0. Cached.
bool taking_xla_cpu_shortcuts();

class Program {
 public:
  // With `prepared`, the program records where each operand comes from, and a strict
  // run() keeps it for equal calls (see prepared_op.h).
  explicit Program(const char* op_name, PreparedCall* prepared = nullptr);

  hlo::Builder& b() { return builder_; }

  // The value of `tensor` (shape = its sizes), converted to `as` if given. A CPU
  // tensor with no dimensions is taken as a runtime scalar, as CUDA does; any other
  // CPU tensor is an error.
  hlo::Value read(const at::Tensor& tensor, std::optional<c10::ScalarType> as = std::nullopt);
  // A scalar operand passed at run time (so changing it never recompiles).
  hlo::Value scalar(const c10::Scalar& value, c10::ScalarType type);
  // A ui64[2] operand passed at run time (a random key: new keys never recompile).
  hlo::Value key(const std::array<uint64_t, 2>& key);
  // Stores `value` into `out` (converted to out's dtype, broadcast to its shape);
  // writes through views land in the base storage.
  void write(const at::Tensor& out, const hlo::Value& value);

  // Compiles if needed and enqueues the program. Returns at once; results are
  // computed asynchronously. In defer_and_fuse mode the program is recorded into
  // the device's pending graph instead.
  void run();
  // Compiles this op's program as a fused graph is compiled (XLA:CPU's fusion emitters on),
  // not with the options for one-op programs: for lowerings that emit many ops that XLA
  // fuses into a few loops (attention), where those emitters are worth their compile time.
  void compile_as_graph() { compile_as_graph_ = true; }
  // Runs this program as one participant of a collective: compiled with
  // `compile_options` (replicated over the group's devices, see
  // pjrt::replicated_compile_options) and launched with `launch_id`, which every
  // participant of this collective passes. It runs at once in every eager mode (after the
  // device's pending defer_and_fuse graph, whose results it may read): each collective is
  // its own program, so ranks that fuse differently can never deadlock.
  // Under spmd_safe in defer_and_fuse mode it is recorded into the pending graph instead.
  void run_collective(const std::string& compile_options, int launch_id);

 private:
  struct StorageState {
    runtime::DeviceStorage* storage = nullptr;
    c10::Storage keep_alive;
    hlo::Value value;  // the storage's current 1-D contents in this program
    bool has_value = false;
    bool written = false;
    // The shape `value` was flattened from, when the last write covered the whole storage
    // (see DeferredGraph::record); empty otherwise.
    std::vector<int64_t> shape;
  };

  // debug mode: waits for `outputs`, raising the failure (or, with
  // TORCH_TPU_DEBUG_NANS=1, a NaN or infinity) under this op's name.
  void run_now();  // run() without the out-of-memory translation
  void await_outputs(const std::vector<pjrt::BufferPtr>& outputs,
                     const std::vector<hlo::Value>& results) const;
  void run_deferred(const std::vector<hlo::Value>& results,
                    const std::vector<StorageState*>& written);
  StorageState& state_of(const at::Tensor& tensor);
  // `view` with a non-zero offset made a run-time operand.
  runtime::StridedView with_offset_operand(const at::Tensor& tensor, runtime::StridedView view);
  // This program's operands and written storages as the PreparedCall describes them.
  std::vector<PreparedCall::Operand> prepared_operands() const;
  std::vector<PreparedCall::Output> prepared_outputs(const std::vector<StorageState*>& written,
                                                     const std::vector<hlo::Value>& results) const;
  // Hands run()'s executable, operands and outputs to the PreparedCall, if any.
  void prepare(std::shared_ptr<pjrt::Executable> executable,
               const std::vector<StorageState*>& written, const std::vector<hlo::Value>& results);
  hlo::Value storage_value(StorageState& state);
  void check_device(const at::Tensor& tensor);

  const char* op_name_;
  PreparedCall* prepared_ = nullptr;
  // The source of the operand the next scalar() makes, where it is not a Scalar argument.
  OperandSource pending_source_;
  const std::string* compile_options_ = nullptr;  // set by run_collective
  int launch_id_ = 0;
  bool compile_as_graph_ = false;
  hlo::Builder builder_;
  int device_ = -1;
  std::vector<StorageState> storages_;
  // Run-time operands in parameter order: a storage (index into storages_) or a scalar buffer.
  struct Operand {
    int storage = -1;
    std::vector<unsigned char> bytes;  // a scalar's or key's value, uploaded by run()
    c10::ScalarType type = c10::kFloat;
    std::vector<int64_t> dims;
    hlo::TensorType parameter;  // the parameter's type in this program
    bool random_key = false;    // bytes are a random key (a replayed graph draws new ones)
    OperandSource source;       // recorded only for a PreparedCall
  };
  std::vector<Operand> operands_;
};

// While this thread records a compiled graph (GraphReplay::begin to finish), `inputs` are
// its arguments' storages, else null. A view of a storage the graph itself computes then
// keeps its offset as a constant, not a run-time operand: the graph takes the same views
// every call, and XLA turns a constant slice into plain indexing, where a run-time one
// needs the storage padded and copied first (the attention's q, k, v split).
void set_compiled_graph_inputs(const std::vector<runtime::DeviceStorage*>* inputs);

// The bytes of `value` as one element of `type`, as the device stores it.
std::vector<unsigned char> scalar_bytes(const c10::Scalar& value, c10::ScalarType type);

// A run-time operand (a scalar's or a key's bytes) as a buffer on `device`.
pjrt::BufferPtr upload_operand(const std::vector<unsigned char>& bytes, c10::ScalarType type,
                               const std::vector<int64_t>& dims, int device);

// Enqueues a one-op program on `device`: timed for torch.profiler as `op`, its `inputs` kept
// alive until it has run (`bytes`, the size of the storages it reads and writes, lets small
// ones be checked in batches). Returns its outputs, which become ready asynchronously.
std::vector<pjrt::BufferPtr> launch_op(const pjrt::Executable& executable,
                                       std::vector<pjrt::BufferPtr> inputs, int device,
                                       const char* op, int launch_id = 0, size_t bytes = SIZE_MAX);

// Runs `check` on a host copy of `flags`, a small contiguous tpu tensor an op computed
// to validate its input (index bounds, targets): at once, or in defer_and_fuse mode
// when the pending graph runs, so that validating never forces a flush.
void check_later(const at::Tensor& flags, std::function<void(const at::Tensor& host)> check);

// The channel id for the next collective over `compile_options` on `device`: 1 when it
// runs as its own program; when it is fused (defer_and_fuse under spmd_safe) the next
// id of the pending graph, which first runs if it holds collectives of another group.
int64_t collective_channel(int device, const std::string& compile_options);

// Copies the first min(src, dst) bytes of `src` into the (empty) `dst`, zero-filling the rest.
void copy_storage_prefix(runtime::DeviceStorage& src, runtime::DeviceStorage& dst);

// Makes sure `storage` holds a buffer (a never-written storage reads as zeros).
void materialize(runtime::DeviceStorage& storage);

}  // namespace tpu::aten
