#pragma once
// Owner of one PJRT_Event. Destroying an event does not cancel the work it tracks.
// A null event stands for work that is already complete (plugins return none for
// some zero-sized transfers).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "plugin.h"

namespace tpu::pjrt {

class Event {
 public:
  Event(std::shared_ptr<const Plugin> plugin, PJRT_Event* event);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  bool is_ready() const;
  // Blocks until the event fires; throws Error carrying the plugin message if it failed.
  void await() const;
  // Calls `done(error_message)` (empty on success) once the event fires, on a plugin thread
  // (at once, on this thread, for a null event). An exception `done` throws on a plugin
  // thread cannot propagate into the plugin: it is written to stderr and kept for
  // take_callback_failures().
  void on_ready(std::function<void(const std::string&)> done) const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_Event* event_;
};

// The messages of the exceptions on_ready callbacks threw since the last call (the newest
// 64), oldest first.
std::vector<std::string> take_callback_failures();

}  // namespace tpu::pjrt
