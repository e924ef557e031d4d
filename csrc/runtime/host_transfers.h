#pragma once
// Copies between host memory and a device that return before the data has moved (what
// non_blocking=True with pinned memory does): which host bytes each one touches, what it
// keeps alive, and waiting for them. A CUDA stream orders such copies with each other;
// PJRT does not, so a copy that reads or writes host bytes an earlier copy still writes
// or reads waits for that one first (wait_for_overlapping). Everything a copy kept alive
// is let go of on one of our threads, never in a plugin callback: a PyTorch storage with
// a Python object would take the GIL there, which the main thread may hold while it waits
// on the plugin.
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "pjrt/event.h"

namespace tpu::runtime {

class HostTransfers {
 public:
  // A download into [begin, begin + bytes) that has landed when `landed` fires;
  // `keep_alive` (the source buffer, the destination's memory) is held until then.
  void add_download(std::shared_ptr<const pjrt::Event> landed, const void* begin, size_t bytes,
                    std::shared_ptr<void> keep_alive);
  // An upload reading [begin, begin + bytes): returns the done-with-host callback to give
  // the plugin, which marks the upload done; `keep_alive` (the host memory) is held until
  // then and let go of later, on one of our threads.
  std::function<void()> add_upload(const void* begin, size_t bytes,
                                   std::shared_ptr<void> keep_alive);

  // Waits for every copy in flight that touches [begin, begin + bytes): before a copy or
  // a synchronous write into those bytes, or an upload from them.
  void wait_for_overlapping(const void* begin, size_t bytes);
  // Waits for every download; throws the first failure of one since the last call.
  void wait_for_downloads();
  // The downloads in flight: what an event recorded now waits for too.
  std::vector<std::shared_ptr<const pjrt::Event>> pending_downloads();
  // Whether every download has landed (what a stream query reports).
  bool downloads_landed();

 private:
  struct Download {
    std::shared_ptr<const pjrt::Event> landed;
    const char* begin;
    const char* end;
    std::shared_ptr<void> keep_alive;
  };
  struct Upload {
    const char* begin;
    const char* end;
    std::shared_ptr<bool> done;  // written under mutex_
  };
  // Moves landed downloads and finished uploads out (keeping a failed download's message)
  // and what callbacks handed over; the caller destroys them after unlocking.
  void take_finished(std::vector<Download>* landed, std::vector<std::shared_ptr<void>>* released);

  std::mutex mutex_;
  std::condition_variable upload_done_;
  std::vector<Download> downloads_;
  std::vector<Upload> uploads_;
  std::vector<std::shared_ptr<void>> released_;  // handed over by upload callbacks
  std::string failure_;                          // the first failed download's message
};

}  // namespace tpu::runtime
