// c10d::Work objects of torch_tpu's backend: one already finished (a collective that
// ran to completion when called), and one finished by stages when waited on
// (receives: header, then payload, then the write-back to the device).
#pragma once

#include <ATen/core/ivalue.h>

#include <functional>
#include <mutex>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace tpu::distributed {

// A Work whose results are already in its tensors; its future is complete.
class CompletedWork : public c10d::Work {
 public:
  CompletedWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds /*timeout*/) override { return true; }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A Work advanced by a step function: step(block) does whatever can be done now
// (everything when block is true) and returns whether the work is finished. Steps run
// on the thread that calls wait() or isCompleted(), so device writes happen there,
// never on a transport thread. An error is kept and raised by every later wait().
class SteppedWork : public c10d::Work {
 public:
  using Step = std::function<bool(bool block)>;
  SteppedWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, Step step);
  bool isCompleted() override;
  bool isSuccess() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  bool advance(bool block);

  std::vector<at::Tensor> outputs_;
  Step step_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  mutable std::mutex mutex_;
  bool done_ = false;
  std::exception_ptr error_;
};

}  // namespace tpu::distributed
