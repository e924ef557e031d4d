#include "distributed/work.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/jit_type.h>

namespace tpu::distributed {

namespace {

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

}  // namespace

CompletedWork::CompletedWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), outputs_(std::move(outputs)), future_(tensor_list_future()) {
  future_->markCompleted(c10::IValue(outputs_));
}

SteppedWork::SteppedWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, Step step)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      step_(std::move(step)),
      future_(tensor_list_future()) {}

bool SteppedWork::advance(bool block) {
  at::AutoDispatchBelowADInplaceOrView no_autograd;  // steps write tensor data only
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_) std::rethrow_exception(error_);
  if (done_) return true;
  try {
    done_ = step_(block);
  } catch (...) {
    error_ = std::current_exception();
    future_->setError(error_);
    throw;
  }
  if (done_) {
    step_ = nullptr;  // release staging buffers now
    future_->markCompleted(c10::IValue(outputs_));
  }
  return done_;
}

bool SteppedWork::isCompleted() {
  try {
    return advance(false);
  } catch (...) {
    return true;  // finished, with an error that wait() raises
  }
}

bool SteppedWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ && !error_;
}

bool SteppedWork::wait(std::chrono::milliseconds /*timeout: the transport's own applies*/) {
  return advance(true);
}

}  // namespace tpu::distributed
