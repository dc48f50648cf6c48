// How work reaches an OpenCL device's command queue: events (waits, timing,
// completion callbacks), programs (argument checks, kernel arguments and
// launches) and the queue.
#include <memory>
#include <utility>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/backends/opencl/opencl_api.h"
#include "svod/backends/opencl/opencl_internal.h"
#include "svod/guard/kernels_in_flight.h"
#include "svod/guard/running_op.h"

namespace svod {

using detail::check_cl;
using detail::cl_status_text;
using detail::opencl_api;

namespace {

// The most work-groups one dimension may have: CUDA's grid limit, and what
// drivers handle (PoCL divides by zero or asserts from 2^32 on).
constexpr int64_t kMaxWorkGroups = (int64_t{1} << 31) - 1;

int64_t checked_product(int64_t a, int64_t b, size_t dim, const std::string& program) {
  int64_t out = 0;
  if (a < 1 || b < 1 || __builtin_mul_overflow(a, b, &out))
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": dimension {} has {} work-groups of {} work-items; both must be >= 1 and their "
                     "product fit in 64 bits",
                     program, dim, a, b);
  if (a > kMaxWorkGroups)
    throw make_error(ErrorKind::Validation, "program \"{}\": dimension {} has {} work-groups; OpenCL launches take at "
                     "most 2^31 - 1 per dimension",
                     program, dim, a);
  return out;
}

}  // namespace

// ---- OpenClEvent -------------------------------------------------------------

OpenClEvent::OpenClEvent(const OpenClEvent& other) : Event(), event_(other.event_), context_(other.context_) {
  if (event_) opencl_api().clRetainEvent(event_);
}

OpenClEvent& OpenClEvent::operator=(const OpenClEvent& other) {
  if (this != &other) {
    OpenClEvent copy(other);
    *this = std::move(copy);
  }
  return *this;
}

OpenClEvent& OpenClEvent::operator=(OpenClEvent&& other) noexcept {
  if (this != &other) {
    release_in_flight();
    if (event_) opencl_api().clReleaseEvent(event_);
    event_ = other.event_;
    context_ = other.context_;
    in_flight_.store(other.in_flight_.exchange(-1));
    other.event_ = nullptr;
  }
  return *this;
}

OpenClEvent::~OpenClEvent() {
  release_in_flight();
  if (event_) opencl_api().clReleaseEvent(event_);
}

void OpenClEvent::release_in_flight() noexcept {
  const int slot = in_flight_.exchange(-1);
  if (slot < 0) return;
  const auto& cl = opencl_api();
  cl_int state = CL_COMPLETE;
  cl.clGetEventInfo(event_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(state), &state, nullptr);
  const auto forget = [](cl_event, cl_int, void* data) {
    forget_kernel_in_flight(static_cast<int>(reinterpret_cast<intptr_t>(data)));
  };
  // CL_COMPLETE is 0, a failed command's status negative.
  if (state <= CL_COMPLETE ||
      cl.clSetEventCallback(event_, CL_COMPLETE, forget, reinterpret_cast<void*>(intptr_t{slot})) != CL_SUCCESS)
    forget_kernel_in_flight(slot);
}

void OpenClEvent::wait() const {
  if (!event_) return;
  const auto& cl = opencl_api();
  const cl_int status = cl.clWaitForEvents(1, &event_);
  forget_kernel_in_flight(in_flight_.exchange(-1));
  cl_int state = CL_COMPLETE;
  cl.clGetEventInfo(event_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(state), &state, nullptr);
  if (status != CL_SUCCESS || state < 0)
    throw make_error(ErrorKind::Execution, "an OpenCL command failed: {}",
                     cl_status_text(state < 0 ? state : status));
}

std::chrono::nanoseconds OpenClEvent::duration() const {
  wait();
  cl_ulong start = 0, end = 0;
  const auto& cl = opencl_api();
  check_cl(cl.clGetEventProfilingInfo(event_, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr),
           "reading the command's start time", ErrorKind::Unsupported);
  check_cl(cl.clGetEventProfilingInfo(event_, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr),
           "reading the command's end time", ErrorKind::Unsupported);
  return std::chrono::nanoseconds(end >= start ? end - start : 0);
}

void OpenClEvent::on_complete(std::function<void(bool ok)> fn) const {
  if (!event_) {
    fn(true);
    return;
  }
  auto* owned = new std::function<void(bool)>(std::move(fn));
  const cl_int status = opencl_api().clSetEventCallback(
      event_, CL_COMPLETE,
      [](cl_event, cl_int state, void* data) {
        std::unique_ptr<std::function<void(bool)>> call(static_cast<std::function<void(bool)>*>(data));
        (*call)(state >= 0);
      },
      owned);
  if (status != CL_SUCCESS) {
    delete owned;
    check_cl(status, "clSetEventCallback");
  }
}

// ---- OpenClProgram -------------------------------------------------------------

OpenClProgram::OpenClProgram(OpenClDevice& device, ProgramSpec spec, detail::ClHandle<cl_program> program,
                             detail::ClHandle<cl_kernel> kernel)
    : Program(std::move(spec)), device_(&device), program_(std::move(program)), kernel_(std::move(kernel)) {
  if (device.details().type == "CPU")
    in_flight_note_ = fmt::format("program \"{}\" (entry {}) on {}", this->spec().display_name(), this->spec().entry,
                                  device.name());
}

Device& OpenClProgram::device() const noexcept { return *device_; }

OpenClEvent OpenClProgram::enqueue(const LaunchArgs& call, std::span<cl_event const> waits) const {
  const auto& [buffers, scalars, dims] = call;
  const std::string& program = spec().display_name();
  const auto& state = device_->state();
  const size_t nbuf = layout().buffer_count();
  if (buffers.size() != nbuf)
    throw make_error(ErrorKind::Validation, "program \"{}\" takes {} buffers, got {}", program, nbuf, buffers.size());
  std::vector<int64_t> abi(layout().scalar_count());
  layout().fill_scalars(scalars, abi.data());
  std::vector<cl_mem> memories(nbuf);
  for (size_t i = 0; i < nbuf; ++i) {
    check_launch_buffer(spec(), layout(), i, buffers[i], abi.data());
    memories[i] = state.memory_of(buffers[i], fmt::format("program \"{}\": buffer {} (\"{}\")", program, i,
                                                      spec().buffers[i].name));
  }
  const LaunchDims sizes = dims ? *dims : layout().dims(scalars);
  size_t global[3], local[3];
  for (size_t d = 0; d < 3; ++d) {
    global[d] = static_cast<size_t>(checked_product(sizes.global[d], sizes.local[d], d, program));
    local[d] = static_cast<size_t>(sizes.local[d]);
  }
  // A device that runs kernels on host threads (PoCL) names this one in the
  // report of a fault there until it finished (kernels_in_flight.h).
  struct InFlight {
    int slot = -1;
    ~InFlight() { forget_kernel_in_flight(slot); }
  } in_flight;
  if (!in_flight_note_.empty())
    in_flight.slot = note_kernel_in_flight(running_op == nullptr ? in_flight_note_
                                                                 : in_flight_note_ + ", " + op_name(*running_op));
  const auto& cl = opencl_api();
  cl_event event = nullptr;
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < nbuf; ++i)
      check_cl(cl.clSetKernelArg(kernel_.get(), static_cast<cl_uint>(i), sizeof(cl_mem), &memories[i]),
               fmt::format("program \"{}\": setting buffer argument {}", program, i), ErrorKind::Validation);
    for (size_t s = 0; s < abi.size(); ++s) {
      const auto index = static_cast<cl_uint>(nbuf + s);
      cl_int status;
      if (spec().scalars[s].type == ScalarType::I32) {
        const cl_int value = static_cast<cl_int>(abi[s]);
        status = cl.clSetKernelArg(kernel_.get(), index, sizeof(value), &value);
      } else {
        const cl_long value = abi[s];
        status = cl.clSetKernelArg(kernel_.get(), index, sizeof(value), &value);
      }
      check_cl(status, fmt::format("program \"{}\": setting scalar \"{}\"", program, spec().scalars[s].name),
               ErrorKind::Validation);
    }
    check_cl(cl.clEnqueueNDRangeKernel(state.command_queue.get(), kernel_.get(), 3, nullptr, global, local,
                                       static_cast<cl_uint>(waits.size()), waits.empty() ? nullptr : waits.data(),
                                       &event),
             fmt::format("program \"{}\": launching {}x{}x{} work-groups of {}x{}x{} on {}", program, sizes.global[0],
                         sizes.global[1], sizes.global[2], sizes.local[0], sizes.local[1], sizes.local[2],
                         device_->name()));
  }
  // Without a flush an implementation may hold the command back until the
  // queue fills, and nothing waiting on its event would make progress.
  cl.clFlush(state.command_queue.get());
  if (debug_level() >= 2) log_debug("launch {} on {}", program, device_->name());
  OpenClEvent launched(event, state.context);
  launched.forget_when_finished(std::exchange(in_flight.slot, -1));
  return launched;
}

void OpenClProgram::launch(const LaunchArgs& call) const { enqueue(call, {}).wait(); }

std::chrono::nanoseconds OpenClProgram::time_launch(const LaunchArgs& call) const {
  return enqueue(call, {}).duration();
}

// ---- OpenClQueue ---------------------------------------------------------------

Device& OpenClQueue::device() const noexcept { return *device_; }

bool OpenClQueue::can_wait_on(const Queue& other) const noexcept {
  const auto* queue = dynamic_cast<const OpenClQueue*>(&other);
  return queue && queue->device_->state().context == device_->state().context;
}

std::vector<cl_event> OpenClQueue::device_waits(std::span<const EventPtr> waits) const {
  std::vector<cl_event> out;
  out.reserve(waits.size());
  for (const EventPtr& e : waits) {
    if (!e) continue;
    const auto* cl = dynamic_cast<const OpenClEvent*>(e.get());
    if (cl && cl->valid() && cl->context() == device_->state().context)
      out.push_back(cl->handle());
    else
      e->wait();
  }
  return out;
}

EventPtr OpenClQueue::launch(const Program& program, const LaunchArgs& call, std::span<const EventPtr> waits) {
  if (&program.device() != device_)
    throw make_error(ErrorKind::Validation, "program \"{}\" belongs to {}, not to the queue of {}",
                     program.spec().display_name(), program.device().name(), device_->name());
  const std::vector<cl_event> list = device_waits(waits);
  return std::make_shared<OpenClEvent>(static_cast<const OpenClProgram&>(program).enqueue(call, list));
}

EventPtr OpenClQueue::copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits) {
  if (!device_->direct_copy(dst, src)) {
    // Staged through host memory, synchronously; its device legs are
    // commands of the in-order queues involved, so they follow earlier work.
    wait_all(waits);
    device_->copy(dst, src);
    return nullptr;
  }
  const std::vector<cl_event> list = device_waits(waits);
  return std::make_shared<OpenClEvent>(device_->state().enqueue_copy(dst, src, list));
}

EventPtr OpenClQueue::record(std::span<const EventPtr> waits) {
  const std::vector<cl_event> list = device_waits(waits);
  cl_event marker = nullptr;
  // On an in-order queue a marker also holds back everything after it.
  const auto& state = device_->state();
  check_cl(opencl_api().clEnqueueMarkerWithWaitList(state.command_queue.get(), static_cast<cl_uint>(list.size()),
                                                    list.empty() ? nullptr : list.data(), &marker),
           fmt::format("{}: clEnqueueMarkerWithWaitList", device_->name()));
  flush();
  return std::make_shared<OpenClEvent>(marker, state.context);
}

void OpenClQueue::flush() { check_cl(opencl_api().clFlush(device_->state().command_queue.get()), "clFlush"); }

void OpenClQueue::finish() { device_->synchronize(); }

}  // namespace svod
