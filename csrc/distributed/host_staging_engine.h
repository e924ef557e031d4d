// The collective engine of the CPU platform: copy device data to host memory (after
// the program that produced it has finished), run the collective with an inner gloo
// process group built from the same store, copy the results back into the device
// tensors before any later device op can read them.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <utility>

#include "distributed/collective_engine.h"

namespace tpu::distributed {

class HostStagingEngine final : public CollectiveEngine {
 public:
  // gloo: a ProcessGroupGloo of this group's ranks (built in Python: torch ships no
  // gloo headers), shared with the caller.
  HostStagingEngine(c10::intrusive_ptr<c10d::Backend> gloo, int rank, int size);
  const char* name() const override { return "host_staging(gloo)"; }
  // Not synchronized with collectives in flight on other threads: callers change the
  // timeout between collectives (TorchTitan does it after a barrier).
  void set_timeout(std::chrono::milliseconds timeout) override { gloo_->setTimeout(timeout); }

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
  WorkPtr done(c10d::OpType type, std::vector<at::Tensor> outputs) const;
  void reduce_on_host(at::Tensor& host, const c10d::ReduceOp& op, bool all, int root);

  struct RecvPosting;

  c10::intrusive_ptr<c10d::Backend> gloo_;
  // The latest receive from each (peer, tag): gloo matches messages to receives in
  // the order they were posted, so a receive posts its header only after the one
  // before it on the same (peer, tag) has posted its payload.
  std::mutex recv_order_mutex_;
  std::map<std::pair<int, int>, std::shared_ptr<RecvPosting>> last_recv_;
  int rank_;
  int size_;
};

}  // namespace tpu::distributed
