#include "svod/device/queue.h"

#include "svod/base/error.h"
#include "svod/device/device.h"

namespace svod {

Event::~Event() = default;

std::chrono::nanoseconds Event::duration() const {
  throw make_error(ErrorKind::Unsupported, "this event carries no device timing");
}

std::string_view to_string(SyncStrategy strategy) noexcept {
  switch (strategy) {
    case SyncStrategy::BlockingHostWait: return "blocking host wait";
    case SyncStrategy::DeviceEvents: return "device events";
  }
  return "?";
}

Queue::~Queue() = default;

void wait_all(std::span<const EventPtr> events) {
  for (const EventPtr& e : events)
    if (e) e->wait();
}

EventPtr HostQueue::launch(const Program& program, const LaunchArgs& args, std::span<const EventPtr> waits) {
  if (&program.device() != device_)
    throw make_error(ErrorKind::Validation, "program \"{}\" belongs to {}, not to the queue of {}",
                     program.spec().display_name(), program.device().name(), device_->name());
  wait_all(waits);
  program.launch(args);
  return nullptr;
}

EventPtr HostQueue::copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits) {
  wait_all(waits);
  if (!dst.valid() || !src.valid()) throw make_error(ErrorKind::Validation, "copy of an empty buffer");
  copy_buffer(dst, src);
  return nullptr;
}

EventPtr HostQueue::record(std::span<const EventPtr> waits) {
  wait_all(waits);
  return nullptr;
}

}  // namespace svod
