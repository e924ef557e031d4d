#include "event.h"

#include "error.h"

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

void on_ready_trampoline(PJRT_Error* error, void* user_arg) {
  std::unique_ptr<OnReadyContext> context(static_cast<OnReadyContext*>(user_arg));
  std::string message;
  if (error != nullptr) message = take_message(context->plugin->api(), error);
  context->done(message);
}
}  // namespace

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
  check(plugin_->api(), plugin_->api()->PJRT_Event_OnReady(&args), "PJRT_Event_OnReady");
  context.release();  // now owned by the callback
}

}  // namespace tpu::pjrt
