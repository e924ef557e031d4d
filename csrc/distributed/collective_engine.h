// The transport under torch_tpu's c10d backend. TpuBackend (the c10d glue) checks
// arguments, agrees shapes across ranks and turns every c10d entry point into these
// few calls; an engine moves the data. Today's engine stages through host memory and
// runs gloo (host_staging_engine.h); an engine of XLA collectives plugs in here.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace tpu::distributed {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

// Contract: every tensor of one call is on one device (tpu or cpu) and may be any
// strided view; the engine reads inputs when called and writes results through the
// tensors it was given (views write through to their base) before the returned Work
// reports completion. Shapes and dtypes are already checked to agree across ranks.
class CollectiveEngine {
 public:
  virtual ~CollectiveEngine() = default;
  virtual const char* name() const = 0;

  virtual WorkPtr all_reduce(const std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op) = 0;
  virtual WorkPtr reduce(const at::Tensor& tensor, int root, const c10d::ReduceOp& op) = 0;
  virtual WorkPtr broadcast(const at::Tensor& tensor, int root) = 0;
  // output: world_size blocks of input's elements, block r from rank r.
  virtual WorkPtr all_gather(const at::Tensor& output, const at::Tensor& input) = 0;
  // input: world_size blocks of output's elements; rank r receives the reduced block r.
  virtual WorkPtr reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                                 const c10d::ReduceOp& op) = 0;
  // Splits count elements of the flattened tensors, one per rank.
  virtual WorkPtr all_to_all(const at::Tensor& output, const at::Tensor& input,
                             const std::vector<int64_t>& output_splits,
                             const std::vector<int64_t>& input_splits) = 0;
  // outputs: one per rank on the root, empty elsewhere.
  virtual WorkPtr gather(const std::vector<at::Tensor>& outputs, const at::Tensor& input,
                         int root) = 0;
  // inputs: one per rank on the root, empty elsewhere.
  virtual WorkPtr scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                          int root) = 0;
  // Never blocks the caller until the peer receives (a blocking send deadlocks rings).
  virtual WorkPtr send(const at::Tensor& tensor, int dst, int tag) = 0;
  virtual WorkPtr recv(const at::Tensor& tensor, int src, int tag) = 0;
  virtual WorkPtr barrier() = 0;
  // How long a collective may wait for its peers before it raises.
  virtual void set_timeout(std::chrono::milliseconds timeout) = 0;

  // Every rank's int64 record of the same length, stacked: [world_size, length]
  // (a CPU tensor). The glue uses it to agree on shapes before moving data.
  virtual at::Tensor exchange_records(const at::Tensor& record) = 0;
};

}  // namespace tpu::distributed
