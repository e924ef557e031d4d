// The collective engine of XLA collectives: each collective on tpu tensors is a small
// StableHLO program (all_reduce, all_gather, reduce_scatter, all_to_all) replicated over
// the group's devices. Every rank compiles the same text with the same device
// assignment (so all share one cached executable) and launches it on its own device
// with the launch id of the collective; the plugin's runtime meets the ranks inside the
// program, device to device, with no host staging. This is the path of TPU pods (ICI)
// and of GPUs; on the CPU plugin it serves ranks that share one process (one thread
// per rank, each on its own device: the test harness).
//
// send and recv of tpu tensors are collective_permute programs over the two ranks'
// devices (xla_p2p.h).
//
// What has no XLA collective here goes to the control engine (the host-staging gloo
// engine of the same ranks): cpu tensors, the agreement exchange, barrier, gather,
// scatter, all_to_all with uneven splits.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/collective_engine.h"
#include "distributed/xla_p2p.h"
#include "hlo/builder.h"

namespace tpu::distributed {

class XlaCollectiveEngine final : public CollectiveEngine {
 public:
  // device: this rank's tpu device index; device_ids: the PJRT device id of every rank
  // of the group, in group-rank order (the replica order of the programs).
  XlaCollectiveEngine(std::unique_ptr<CollectiveEngine> control, int rank, int size, int device,
                      std::vector<int64_t> device_ids);
  const char* name() const override { return "xla"; }
  void set_timeout(std::chrono::milliseconds timeout) override { control_->set_timeout(timeout); }

  WorkPtr all_reduce(const std::vector<at::Tensor>& tensors, const c10d::ReduceOp& op) override;
  WorkPtr reduce(const at::Tensor& tensor, int root, const c10d::ReduceOp& op) override;
  WorkPtr broadcast(const at::Tensor& tensor, int root) override;
  WorkPtr all_gather(const at::Tensor& output, const at::Tensor& input) override;
  WorkPtr reduce_scatter(const at::Tensor& output, const at::Tensor& input,
                         const c10d::ReduceOp& op) override;
  WorkPtr all_to_all(const at::Tensor& output, const at::Tensor& input,
                     const std::vector<int64_t>& output_splits,
                     const std::vector<int64_t>& input_splits) override;
  WorkPtr gather(const std::vector<at::Tensor>& outputs, const at::Tensor& input,
                 int root) override;
  WorkPtr scatter(const at::Tensor& output, const std::vector<at::Tensor>& inputs,
                  int root) override;
  WorkPtr send(const at::Tensor& tensor, int dst, int tag) override;
  WorkPtr recv(const at::Tensor& tensor, int src, int tag) override;
  WorkPtr barrier() override;
  at::Tensor exchange_records(const at::Tensor& record) override;

 private:
  using Body = std::function<hlo::Value(hlo::Builder&, const hlo::Value&)>;
  // Runs `body` on the dense value of `input` (this rank's copy, shaped [size_, rest] or
  // as given) in one replicated program and returns its result as a new tensor on this
  // rank's device, shaped `result_sizes`.
  at::Tensor launch(const char* name, const at::Tensor& input, const Body& body,
                    c10::IntArrayRef result_sizes);
  // The reduced values of `input` (a new tensor), for every ReduceOp.
  at::Tensor reduced(const at::Tensor& input, const c10d::ReduceOp& op, bool scatter);
  // Whether the XLA path serves these tensors (tpu tensors with elements).
  bool serves(const at::Tensor& t) const;
  WorkPtr done(c10d::OpType type, std::vector<at::Tensor> outputs) const;

  std::unique_ptr<CollectiveEngine> control_;
  int rank_;
  int size_;
  int device_;
  std::string compile_options_;  // replicated over the group's devices
  // Every rank issues its collectives in the same order, so the n-th collective of a
  // group has the same id on every rank: the launch id that joins their runs.
  int next_launch_ = 1;
  XlaPointToPoint p2p_;  // uses *control_
};

}  // namespace tpu::distributed
