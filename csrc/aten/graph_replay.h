#pragma once
// Record once, replay: torch.compile(backend="tpu") runs each AOTAutograd graph
// through the eager lowerings into one deferred graph (see torch_tpu/dynamo.py). The
// first call for an input signature records what that flush ran; later calls with
// the same signature run the recorded program directly on the new arguments: no FX
// interpretation, no lowering, no program text, no hashing.
//
// A plan is kept only when the recorded call was exactly one program that read only
// the call's arguments and wrote only its arguments and outputs (no CPU fallback,
// no transfer, no host read, no collective), so replaying it is the call.
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/deferred_graph.h"

namespace tpu::aten {

// One argument of a compiled graph: a tensor, or any other value by its text, which
// must repeat exactly for a plan to apply.
struct GraphArgument {
  at::Tensor tensor;  // undefined for a non-tensor
  std::string constant;
};

class GraphReplay {
 public:
  explicit GraphReplay(std::string label) : label_(std::move(label)) {}

  // Runs the plan recorded for arguments like `args` and returns its outputs (an
  // undefined tensor where the output is not a tensor), with `plan` set to the plan's
  // index; nullopt when no plan applies (new signature, device busy).
  std::optional<std::vector<at::Tensor>> run(const std::vector<GraphArgument>& args, int* plan);

  // Around a call run the normal way: begin() runs pending graphs and watches what
  // the call does; finish() keeps a plan if the call can be replayed (`outputs` as
  // run() returns them) and returns its index, or -1 with `why` set.
  void begin(const std::vector<GraphArgument>& args);
  int finish(const std::vector<GraphArgument>& args, const std::vector<at::Tensor>& outputs,
             std::string* why);
  // Ends a begin() whose call raised.
  void abandon();

  size_t plans() {
    std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }
  const std::string& label() const { return label_; }
  // Plans kept per graph; a graph that meets more signatures records the rest each call.
  // A graph run at size buckets meets one signature per combination of its dimensions'
  // buckets (batch x prompt length x cache length in generation: a dozen or two).
  static constexpr size_t kMaxPlans = 32;

 private:
  struct ArgumentSignature {
    bool is_tensor = false;
    std::string constant;
    c10::ScalarType dtype = c10::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
    size_t nbytes = 0;        // the storage's
    int same_storage = -1;    // an earlier argument with this storage, or -1
    bool has_buffer = false;  // the storage holds contents (else it reads as zeros)
    hlo::ElementType element = hlo::ElementType::U8;
  };
  // Where a returned tensor's data comes from.
  struct OutputTemplate {
    enum Kind { NotTensor, Empty, Argument, Result } kind = NotTensor;
    int source = -1;  // Argument: the argument; Result: the recorded result
    c10::ScalarType dtype = c10::kFloat;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
  };
  struct Plan {
    std::vector<ArgumentSignature> signature;
    c10::DeviceIndex device = 0;
    std::shared_ptr<runtime::DeferredGraph::Recording> recording;
    std::vector<int> parameter_arguments;   // per program parameter: the argument read
    std::vector<int> result_arguments;      // per result: the argument it overwrites, or -1
    std::vector<size_t> result_nbytes;      // per result that is a new storage
    std::vector<at::Generator> generators;  // per random key
    std::vector<OutputTemplate> outputs;
  };

  // The signature of `args`, or nullopt with `why` set when they cannot be replayed.
  std::optional<std::vector<ArgumentSignature>> signature_of(const std::vector<GraphArgument>& args,
                                                             c10::DeviceIndex* device,
                                                             std::string* why) const;
  bool matches(const Plan& plan, const std::vector<GraphArgument>& args) const;
  // nullopt when a buffer the program would consume is still held elsewhere.
  std::optional<std::vector<at::Tensor>> replay(const Plan& plan,
                                                const std::vector<GraphArgument>& args);
  std::string explain_new_signature(const std::vector<ArgumentSignature>& signature) const;

  std::string label_;
  // One compiled graph may be called from several threads: plans and the watch are
  // shared, and only one thread records at a time (the others run unrecorded).
  std::mutex mutex_;
  std::thread::id watcher_;
  std::vector<Plan> plans_;
  // State of the call being recorded (between begin() and finish()).
  struct Watch {
    bool recordable = false;
    std::string why;
    c10::DeviceIndex device = 0;
    std::vector<ArgumentSignature> signature;
    std::shared_ptr<runtime::DeferredGraph::Recording> recording;
    std::vector<at::Generator> generators;
    // The arguments' buffers when the call began (identities only: holding them would
    // keep the recorded graph from donating them).
    std::vector<std::pair<PJRT_Buffer*, int>> buffers;
    std::vector<runtime::DeviceStorage*> storages;  // the arguments' (set_compiled_graph_inputs)
    int64_t executions = 0, transfers = 0, fallbacks = 0;
  } watch_;
};

}  // namespace tpu::aten
