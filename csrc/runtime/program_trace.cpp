#include "runtime/program_trace.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <iterator>
#include <map>
#include <set>

namespace tpu::runtime {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// One recorded run; its end is filled in by the outputs' ready callbacks (plugin threads).
struct ProgramTrace::Pending {
  ProgramRun run;
  int remaining = 0;
  std::mutex mutex;
  std::condition_variable finished;
};

void ProgramTrace::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  runs_.clear();
  recording_.store(true);
}

void ProgramTrace::stop() {
  recording_.store(false);
  std::vector<std::shared_ptr<Pending>> runs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    runs = runs_;
  }
  for (const auto& pending : runs) {
    std::unique_lock<std::mutex> lock(pending->mutex);
    pending->finished.wait(lock, [&] { return pending->remaining == 0; });
  }
}

void ProgramTrace::record(std::string name, int device, int64_t enqueued_ns,
                          const std::vector<pjrt::BufferPtr>& outputs) {
  auto pending = std::make_shared<Pending>();
  pending->run = ProgramRun{std::move(name), device, enqueued_ns, enqueued_ns};
  pending->remaining = static_cast<int>(outputs.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    runs_.push_back(pending);
  }
  for (const pjrt::BufferPtr& output : outputs) {
    // A failed run still ends; its error reaches the user through the output buffer.
    output->ready_event()->on_ready([pending](const std::string& /*error*/) {
      int64_t ready = now_ns();
      std::lock_guard<std::mutex> lock(pending->mutex);
      pending->run.end_ns = std::max(pending->run.end_ns, ready);
      if (--pending->remaining == 0) pending->finished.notify_all();
    });
  }
}

std::vector<ProgramRun> ProgramTrace::take() {
  std::vector<std::shared_ptr<Pending>> runs;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    runs.swap(runs_);
  }
  std::vector<ProgramRun> finished;
  for (const auto& pending : runs) {
    std::lock_guard<std::mutex> lock(pending->mutex);
    if (pending->remaining == 0) finished.push_back(pending->run);
  }
  std::stable_sort(finished.begin(), finished.end(), [](const ProgramRun& a, const ProgramRun& b) {
    return a.start_ns < b.start_ns;
  });
  // Per device, the ends of the runs seen so far, sorted.
  std::map<int, std::multiset<int64_t>> ends;
  for (ProgramRun& run : finished) {
    std::multiset<int64_t>& before = ends[run.device];
    auto last_done = before.upper_bound(run.end_ns);  // first end after this run's
    if (last_done != before.begin()) run.start_ns = std::max(run.start_ns, *std::prev(last_done));
    before.insert(run.end_ns);
  }
  return finished;
}

ProgramTrace& program_trace() {
  static ProgramTrace trace;
  return trace;
}

ProfiledRun::ProfiledRun(const char* name, int device, int fused_ops)
    : name_(name), device_(device), fused_ops_(fused_ops) {
  if (program_trace().recording()) enqueued_ns_ = now_ns();
}

void ProfiledRun::done(const std::vector<pjrt::BufferPtr>& outputs) {
  if (enqueued_ns_ == 0 || !program_trace().recording()) return;
  std::string name = name_;
  if (fused_ops_ > 0) name += " (" + std::to_string(fused_ops_) + " ops)";
  program_trace().record(std::move(name), device_, enqueued_ns_, outputs);
}

}  // namespace tpu::runtime
