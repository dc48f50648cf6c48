// NativeStream: a device's own stream, for a library that enqueues work on it
// itself (NCCL on CUDA: svod/comm/nccl_communicator.cpp). Code above the
// registry reaches it without naming the backend:
// dynamic_cast<NativeStream*>(&device) is null for a device without one.
#pragma once

#include <functional>
#include <string_view>

#include "svod/device/buffer.h"

namespace svod {

class NativeStream {
 public:
  // The stream (a CUstream on CUDA), after making the device's context
  // current on the calling thread; work enqueued on it runs after svod's.
  virtual void* enter_stream() = 0;
  // The device address of `buffer` when it is this device's memory, else
  // null.
  virtual void* device_address(const Buffer& buffer) const noexcept = 0;
  // Waits for everything enqueued on the stream so far, calling `poll`
  // between checks (it throws to stop waiting: a deadline, an error the
  // library reports); Error(Execution) naming `what` when the device reports
  // a failure.
  virtual void wait_stream(std::string_view what, const std::function<void()>& poll) = 0;

 protected:
  ~NativeStream() = default;
};

}  // namespace svod
