#pragma once
// A point in the device's stream of work, as torch.tpu.Event records it: the marker is
// complete once every computation that was pending when it was recorded has finished,
// and it keeps the moment that happened, so two markers time the work between them.
// PJRT runs one ordered stream per device, so this is all a CUDA event means here.
#include <cstdint>
#include <memory>
#include <vector>

#include "pjrt/buffer.h"

namespace tpu::runtime {

class Marker {
 public:
  // Captures `pending`: the buffers still being computed at record time, and the
  // device-to-host copies still in flight (`transfers`).
  explicit Marker(const std::vector<pjrt::BufferPtr>& pending,
                  std::vector<std::shared_ptr<const pjrt::Event>> transfers = {});

  bool query() const;
  // Blocks until complete; throws the first failure of the captured computations.
  void wait() const;
  // When the last captured computation finished (now_ns() clock); the record time if
  // none was pending. Waits first.
  int64_t completed_ns() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  // Polled and awaited rather than given a callback: a copy's event has one already.
  std::vector<std::shared_ptr<const pjrt::Event>> transfers_;
};

}  // namespace tpu::runtime
