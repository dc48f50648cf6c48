// What the C API's tests share: statuses that free themselves and print on
// failure, checks of error kinds and messages, and handles released at the
// end of a test.
#pragma once

#include <svod/svod.h>

#include <gtest/gtest.h>

#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace svod::test::capi {

// Owns a status and prints it when an expectation fails.
struct Status {
  explicit Status(svod_status* s) : status(s) {}
  ~Status() { svod_status_free(status); }
  Status(const Status&) = delete;
  Status& operator=(const Status&) = delete;

  svod_error_kind kind() const { return svod_status_kind(status); }
  std::string message() const { return svod_status_message(status); }

  svod_status* status;
};

inline std::ostream& operator<<(std::ostream& os, const Status& s) {
  return os << svod_error_kind_name(s.kind()) << ": " << s.message();
}

#define EXPECT_OK(call)                      \
  do {                                       \
    ::svod::test::capi::Status status_(call); \
    EXPECT_EQ(status_.kind(), SVOD_OK) << status_; \
  } while (0)
#define ASSERT_OK(call)                      \
  do {                                       \
    ::svod::test::capi::Status status_(call); \
    ASSERT_EQ(status_.kind(), SVOD_OK) << status_; \
  } while (0)

// Expects `call` to fail with `kind` and a message containing `text`.
inline void expect_error(svod_status* call, svod_error_kind kind, const std::string& text) {
  Status status(call);
  ASSERT_NE(status.status, nullptr) << "expected a " << svod_error_kind_name(kind) << " status";
  EXPECT_EQ(status.kind(), kind) << status;
  EXPECT_NE(status.message().find(text), std::string::npos) << status << "\n(expected to contain: " << text << ")";
}

// Handles released at the end of a test.
struct Device {
  Device() {
    Status status(svod_device_get("CPU", &handle));
    if (status.status) throw std::runtime_error(status.message());
  }
  ~Device() { svod_status_free(svod_device_release(handle)); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  svod_device* handle = nullptr;
};

template <typename Handle, svod_status* (*Release)(Handle*)>
struct Owned {
  Owned() = default;
  ~Owned() {
    if (handle) svod_status_free(Release(handle));
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  Handle* handle = nullptr;
};
using Buffer = Owned<svod_buffer, svod_buffer_release>;
using Program = Owned<svod_program, svod_program_release>;
using Plan = Owned<svod_plan, svod_plan_release>;
using Comm = Owned<svod_comm, svod_comm_release>;

// The elements of the plan's (CPU) buffer `name`, read as T.
template <typename T = float>
std::vector<T> plan_values(svod_plan* plan, const char* name) {
  Buffer buffer;
  EXPECT_OK(svod_plan_buffer(plan, name, &buffer.handle));
  void* data = nullptr;
  EXPECT_OK(svod_buffer_data(buffer.handle, &data));
  if (data == nullptr) return {};
  const auto* p = static_cast<const T*>(data);
  return {p, p + svod_buffer_bytes(buffer.handle) / sizeof(T)};
}

}  // namespace svod::test::capi
