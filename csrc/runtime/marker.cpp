#include "runtime/marker.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>

#include "runtime/program_trace.h"

namespace tpu::runtime {

// Shared with the ready callbacks, which run on plugin threads and may outlive the marker.
struct Marker::State {
  std::mutex mutex;
  std::condition_variable finished;
  int remaining = 0;
  int64_t completed_ns = 0;
  std::string error;
};

Marker::Marker(const std::vector<pjrt::BufferPtr>& pending,
               std::vector<std::shared_ptr<const pjrt::Event>> transfers)
    : state_(std::make_shared<State>()), transfers_(std::move(transfers)) {
  state_->completed_ns = now_ns();
  state_->remaining = static_cast<int>(pending.size());
  for (const pjrt::BufferPtr& buffer : pending) {
    buffer->ready_event()->on_ready([state = state_](const std::string& error) {
      int64_t ready = now_ns();
      std::lock_guard<std::mutex> lock(state->mutex);
      state->completed_ns = std::max(state->completed_ns, ready);
      if (!error.empty() && state->error.empty()) state->error = error;
      if (--state->remaining == 0) state->finished.notify_all();
    });
  }
}

bool Marker::query() const {
  for (const auto& transfer : transfers_) {
    if (!transfer->is_ready()) return false;
  }
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->remaining == 0;
}

void Marker::wait() const {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->finished.wait(lock, [&] { return state_->remaining == 0; });
  if (!state_->error.empty())
    throw std::runtime_error("device computation failed: " + state_->error);
  lock.unlock();
  bool waited = false;
  for (const auto& transfer : transfers_) {
    waited = waited || !transfer->is_ready();
    transfer->await();
  }
  // A copy's moment is when this thread saw it land (an upper bound).
  if (waited) {
    lock.lock();
    state_->completed_ns = std::max(state_->completed_ns, now_ns());
  }
}

int64_t Marker::completed_ns() const {
  wait();
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->completed_ns;
}

}  // namespace tpu::runtime
