#include "event.h"

#include <cstdio>
#include <deque>
#include <exception>
#include <mutex>

#include "error.h"

// ThreadSanitizer cannot see the plugin's synchronization (the plugin is not instrumented),
// so a callback's reads of what was written before it was registered look like races. The
// annotations state what PJRT guarantees: registration happens before the callback runs.
#if defined(__SANITIZE_THREAD__)
#define TPU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TPU_TSAN 1
#endif
#endif
#ifdef TPU_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace tpu::pjrt {

Event::Event(std::shared_ptr<const Plugin> plugin, PJRT_Event* event)
    : plugin_(std::move(plugin)), event_(event) {}

Event::~Event() {
  if (event_ == nullptr) return;
  auto args = PJRT_ARGS(PJRT_Event_Destroy_Args);
  args.event = event_;
  PJRT_Error* error = plugin_->api()->PJRT_Event_Destroy(&args);
  if (error != nullptr) take_message(plugin_->api(), error);  // a destructor must not throw
}

bool Event::is_ready() const {
  if (event_ == nullptr) return true;
  auto args = PJRT_ARGS(PJRT_Event_IsReady_Args);
  args.event = event_;
  check(plugin_->api(), plugin_->api()->PJRT_Event_IsReady(&args), "PJRT_Event_IsReady");
  return args.is_ready;
}

void Event::await() const {
  if (event_ == nullptr) return;
  auto args = PJRT_ARGS(PJRT_Event_Await_Args);
  args.event = event_;
  check(plugin_->api(), plugin_->api()->PJRT_Event_Await(&args), "device computation failed");
}

namespace {
struct OnReadyContext {
  std::shared_ptr<const Plugin> plugin;
  std::function<void(const std::string&)> done;
};

std::mutex failures_mutex;
std::deque<std::string> failures;  // the newest kMaxFailures, oldest first
constexpr size_t kMaxFailures = 64;

// Never throws: it runs inside the catch of a C callback.
void record_callback_failure(const char* what) noexcept {
  std::fprintf(stderr, "torch_tpu: an on_ready callback failed on a PJRT thread: %s\n", what);
  try {
    std::lock_guard<std::mutex> lock(failures_mutex);
    if (failures.size() == kMaxFailures) failures.pop_front();
    failures.emplace_back(what);
  } catch (...) {  // out of memory for the record: the line above is all that is left
  }
}

// Called by the plugin, on its own threads, through C frames: an exception leaving it would
// call std::terminate (no unwinding through the plugin), so none does.
void on_ready_trampoline(PJRT_Error* error, void* user_arg) noexcept {
#ifdef TPU_TSAN
  __tsan_acquire(user_arg);
#endif
  std::unique_ptr<OnReadyContext> context(static_cast<OnReadyContext*>(user_arg));
  try {
    std::string message;
    if (error != nullptr) message = take_message(context->plugin->api(), error);
    context->done(message);
  } catch (const std::exception& e) {
    record_callback_failure(e.what());
  } catch (...) {
    record_callback_failure("an exception that is not a std::exception");
  }
}
}  // namespace

std::vector<std::string> take_callback_failures() {
  std::lock_guard<std::mutex> lock(failures_mutex);
  std::vector<std::string> taken(failures.begin(), failures.end());
  failures.clear();
  return taken;
}

void Event::on_ready(std::function<void(const std::string&)> done) const {
  if (event_ == nullptr) {
    done("");
    return;
  }
  auto context = std::make_unique<OnReadyContext>(OnReadyContext{plugin_, std::move(done)});
  auto args = PJRT_ARGS(PJRT_Event_OnReady_Args);
  args.event = event_;
  args.callback = &on_ready_trampoline;
  args.user_arg = context.get();
#ifdef TPU_TSAN
  __tsan_release(context.get());
#endif
  check(plugin_->api(), plugin_->api()->PJRT_Event_OnReady(&args), "PJRT_Event_OnReady");
  context.release();  // now owned by the callback
}

}  // namespace tpu::pjrt
