#include "runtime/host_transfers.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <utility>

namespace tpu::runtime {
namespace {

bool overlaps(const char* begin, const char* end, const char* other_begin, const char* other_end) {
  return begin < other_end && other_begin < end;
}

// A failed event's message, or empty; the event has fired.
std::string failure_of(const pjrt::Event& event) {
  try {
    event.await();
    return {};
  } catch (const std::exception& error) {
    return error.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

void HostTransfers::take_finished(std::vector<Download>* landed,
                                  std::vector<std::shared_ptr<void>>* released) {
  auto still_flying =
      std::stable_partition(downloads_.begin(), downloads_.end(),
                            [](const Download& download) { return !download.landed->is_ready(); });
  for (auto it = still_flying; it != downloads_.end(); ++it) {
    std::string failure = failure_of(*it->landed);  // ready: does not block
    if (!failure.empty() && failure_.empty()) failure_ = failure;
    landed->push_back(std::move(*it));
  }
  downloads_.erase(still_flying, downloads_.end());
  uploads_.erase(std::remove_if(uploads_.begin(), uploads_.end(),
                                [](const Upload& upload) { return *upload.done; }),
                 uploads_.end());
  released->swap(released_);
}

void HostTransfers::add_download(std::shared_ptr<const pjrt::Event> landed, const void* begin,
                                 size_t bytes, std::shared_ptr<void> keep_alive) {
  std::vector<Download> finished;  // destroyed after the lock
  std::vector<std::shared_ptr<void>> released;
  std::lock_guard<std::mutex> lock(mutex_);
  take_finished(&finished, &released);
  const char* start = static_cast<const char*>(begin);
  try {
    downloads_.push_back({landed, start, start + bytes, std::move(keep_alive)});
  } catch (...) {
    failure_of(*landed);  // the memory must outlive the copy: wait for it here
    throw;
  }
}

std::function<void()> HostTransfers::add_upload(const void* begin, size_t bytes,
                                                std::shared_ptr<void> keep_alive) {
  std::vector<Download> finished;
  std::vector<std::shared_ptr<void>> released;
  std::lock_guard<std::mutex> lock(mutex_);
  take_finished(&finished, &released);
  auto done = std::make_shared<bool>(false);
  const char* start = static_cast<const char*>(begin);
  uploads_.push_back({start, start + bytes, done});
  // Runs on a plugin thread: no destructor of `keep` may run there, so it is handed over.
  return [this, done, keep = std::move(keep_alive)]() mutable {
    std::lock_guard<std::mutex> lock(mutex_);
    *done = true;
    released_.push_back(std::move(keep));
    upload_done_.notify_all();
  };
}

void HostTransfers::wait_for_overlapping(const void* begin, size_t bytes) {
  const char* start = static_cast<const char*>(begin);
  const char* end = start + bytes;
  std::vector<std::shared_ptr<const pjrt::Event>> downloads;
  std::vector<std::shared_ptr<bool>> uploads;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (downloads_.empty() && uploads_.empty()) return;
    for (const Download& download : downloads_) {
      if (overlaps(start, end, download.begin, download.end)) downloads.push_back(download.landed);
    }
    for (const Upload& upload : uploads_) {
      if (overlaps(start, end, upload.begin, upload.end)) uploads.push_back(upload.done);
    }
  }
  for (const auto& landed : downloads) failure_of(*landed);  // a failure is raised later
  std::unique_lock<std::mutex> lock(mutex_);
  for (const auto& done : uploads) upload_done_.wait(lock, [&] { return *done; });
}

void HostTransfers::wait_for_downloads() {
  std::vector<Download> downloads;
  std::vector<std::shared_ptr<void>> released;
  std::string failure;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    downloads.swap(downloads_);
    released.swap(released_);
    failure.swap(failure_);
  }
  // Every copy lands before its memory is let go of, also when one of them failed.
  for (const Download& download : downloads) {
    std::string message = failure_of(*download.landed);
    if (failure.empty()) failure = message;
  }
  downloads.clear();
  released.clear();
  if (!failure.empty())
    throw std::runtime_error("a non_blocking copy to the host failed: " + failure);
}

std::vector<std::shared_ptr<const pjrt::Event>> HostTransfers::pending_downloads() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<const pjrt::Event>> events;
  for (const Download& download : downloads_) events.push_back(download.landed);
  return events;
}

bool HostTransfers::downloads_landed() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Download& download : downloads_) {
    if (!download.landed->is_ready()) return false;
  }
  return true;
}

}  // namespace tpu::runtime
