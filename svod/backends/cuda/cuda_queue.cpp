// How work reaches a CUDA device's stream: programs (argument checks, packing
// and launches), the events recorded around each command, and the queue.
#include <memory>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/backends/cuda/cuda_internal.h"

namespace svod {

using detail::check_cu;

namespace detail {

std::array<unsigned, 6> driver_dims(const LaunchDims& dims, const std::string& program) {
  std::array<unsigned, 6> out{};
  for (size_t d = 0; d < 3; ++d) {
    const int64_t g = dims.global[d], b = dims.local[d];
    if (g < 1 || b < 1 || g > UINT32_MAX || b > UINT32_MAX)
      throw make_error(ErrorKind::Validation,
                       "program \"{}\": dimension {} has a grid of {} blocks of {} threads; both must be in [1, 2^32)",
                       program, d, g, b);
    out[d] = static_cast<unsigned>(g);
    out[3 + d] = static_cast<unsigned>(b);
  }
  return out;
}

std::string dims_text(const LaunchDims& d) {
  return fmt::format("a grid of {}x{}x{} blocks of {}x{}x{} threads", d.global[0], d.global[1], d.global[2],
                     d.local[0], d.local[1], d.local[2]);
}

}  // namespace detail

// ---- CudaProgram -----------------------------------------------------------------

CudaProgram::CudaProgram(CudaDevice& device, ProgramSpec spec, cu::CUmodule module, cu::CUfunction function)
    : Program(std::move(spec)), device_(&device), module_(module), function_(function) {}

CudaProgram::~CudaProgram() {
  device_->state().make_current();
  device_->state().api.cuModuleUnload(module_);
}

Device& CudaProgram::device() const noexcept { return *device_; }

void CudaProgram::prepare(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                          CudaKernelParams& out) const {
  const std::string& program = spec().display_name();
  const size_t nbuf = layout().buffer_count();
  if (buffers.size() != nbuf)
    throw make_error(ErrorKind::Validation, "program \"{}\" takes {} buffers, got {}", program, nbuf, buffers.size());
  std::array<int64_t, CudaKernelParams::kMaxParams> abi{};
  if (layout().scalar_count() > abi.size())
    throw make_error(ErrorKind::Validation, "program \"{}\" declares {} scalars; a CUDA kernel takes at most {}",
                     program, layout().scalar_count(), abi.size());
  layout().fill_scalars(scalars, abi.data());
  std::array<uint64_t, CudaKernelParams::kMaxParams> pointers{};
  if (nbuf > pointers.size())
    throw make_error(ErrorKind::Validation, "program \"{}\" declares {} buffers; a CUDA kernel takes at most {}",
                     program, nbuf, pointers.size());
  for (size_t i = 0; i < nbuf; ++i) {
    check_launch_buffer(spec(), layout(), i, buffers[i], abi.data());
    pointers[i] = device_->state().pointer_of(
        buffers[i], fmt::format("program \"{}\": buffer {} (\"{}\")", program, i, spec().buffers[i].name));
  }
  out.pack({pointers.data(), nbuf}, spec().scalars, {abi.data(), layout().scalar_count()});
}

void CudaProgram::enqueue(CudaKernelParams& params, const LaunchDims& dims) const {
  const auto d = detail::driver_dims(dims, spec().display_name());
  const auto& state = device_->state();
  check_cu(state.api.cuLaunchKernel(function_, d[0], d[1], d[2], d[3], d[4], d[5], 0, state.stream, params.pointers(),
                                    nullptr),
           fmt::format("program \"{}\": launching {} on {}", spec().display_name(), detail::dims_text(dims),
                       device_->name()));
  if (debug_level() >= 2) log_debug("launch {} on {}", spec().display_name(), device_->name());
}

void CudaProgram::launch(const LaunchArgs& call) const {
  const auto& [buffers, scalars, dims] = call;
  CudaKernelParams params;
  prepare(buffers, scalars, params);
  const LaunchDims sizes = dims ? *dims : this->dims(scalars);
  const auto& state = device_->state();
  state.make_current();
  enqueue(params, sizes);
  check_cu(state.api.cuStreamSynchronize(state.stream),
           fmt::format("program \"{}\" failed on {}", spec().display_name(), device_->name()));
}

std::chrono::nanoseconds CudaProgram::time_launch(const LaunchArgs& call) const {
  return device_->state().queue.launch(*this, call)->duration();
}

// ---- events and the queue ------------------------------------------------------------

CudaEvent::CudaEvent(const CudaDevice& device) : device_(&device) {
  const auto& state = device.state();
  const auto& api = state.api;
  state.make_current();
  check_cu(api.cuEventCreate(&start_, cu::CU_EVENT_DEFAULT), fmt::format("{}: cuEventCreate", device.name()));
  if (const cu::CUresult status = api.cuEventCreate(&end_, cu::CU_EVENT_DEFAULT); status != cu::CUDA_SUCCESS) {
    api.cuEventDestroy(start_);
    check_cu(status, fmt::format("{}: cuEventCreate", device.name()));
  }
}

CudaEvent::~CudaEvent() {
  const auto& state = device_->state();
  state.make_current();
  state.api.cuEventDestroy(start_);
  state.api.cuEventDestroy(end_);
}

void CudaEvent::wait() const {
  const auto& state = device_->state();
  state.make_current();
  check_cu(state.api.cuEventSynchronize(end_), fmt::format("a command on {} failed", device_->name()));
}

std::chrono::nanoseconds CudaEvent::duration() const {
  wait();
  float ms = 0;
  check_cu(device_->state().api.cuEventElapsedTime(&ms, start_, end_), "cuEventElapsedTime", ErrorKind::Unsupported);
  return std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(ms) * 1e6));
}

Device& CudaQueue::device() const noexcept { return *device_; }

// cuStreamWaitEvent takes events of any context of the process.
bool CudaQueue::can_wait_on(const Queue& other) const noexcept { return dynamic_cast<const CudaQueue*>(&other); }

void CudaQueue::wait_for(std::span<const EventPtr> waits) {
  const auto& state = device_->state();
  for (const EventPtr& e : waits) {
    if (!e) continue;
    if (const auto* cuda = dynamic_cast<const CudaEvent*>(e.get()))
      check_cu(state.api.cuStreamWaitEvent(state.stream, cuda->end(), 0),
               fmt::format("{}: cuStreamWaitEvent", device_->name()));
    else
      e->wait();
  }
}

EventPtr CudaQueue::launch(const Program& program, const LaunchArgs& call, std::span<const EventPtr> waits) {
  const auto& [buffers, scalars, dims] = call;
  if (&program.device() != device_)
    throw make_error(ErrorKind::Validation, "program \"{}\" belongs to {}, not to the queue of {}",
                     program.spec().display_name(), program.device().name(), device_->name());
  const auto& cuda = static_cast<const CudaProgram&>(program);
  CudaKernelParams params;
  cuda.prepare(buffers, scalars, params);
  const LaunchDims sizes = dims ? *dims : cuda.dims(scalars);
  auto event = std::make_shared<CudaEvent>(*device_);  // makes the context current
  wait_for(waits);
  const auto& state = device_->state();
  check_cu(state.api.cuEventRecord(event->start(), state.stream), "cuEventRecord");
  cuda.enqueue(params, sizes);
  check_cu(state.api.cuEventRecord(event->end(), state.stream), "cuEventRecord");
  return event;
}

EventPtr CudaQueue::copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  const auto& state = device_->state();
  if (!state.owns(dst) || !state.owns(src) || (&dst.storage() == &src.storage() && dst.overlaps(src))) {
    // Host memory or another device: CudaDevice::copy stages and chunks it
    // on this stream, synchronously.
    wait_all(waits);
    device_->copy(dst, src);
    return nullptr;
  }
  auto event = std::make_shared<CudaEvent>(*device_);
  wait_for(waits);
  check_cu(state.api.cuEventRecord(event->start(), state.stream), "cuEventRecord");
  if (src.bytes() > 0)
    check_cu(state.api.cuMemcpyDtoDAsync(state.pointer_of(dst, "the destination"),
                                         state.pointer_of(src, "the source"), src.bytes(), state.stream),
             fmt::format("{}: copying {} bytes", device_->name(), src.bytes()));
  check_cu(state.api.cuEventRecord(event->end(), state.stream), "cuEventRecord");
  return event;
}

EventPtr CudaQueue::record(std::span<const EventPtr> waits) {
  auto event = std::make_shared<CudaEvent>(*device_);
  // cuStreamWaitEvent holds back everything submitted to the stream later.
  wait_for(waits);
  const auto& state = device_->state();
  check_cu(state.api.cuEventRecord(event->start(), state.stream), "cuEventRecord");
  check_cu(state.api.cuEventRecord(event->end(), state.stream), "cuEventRecord");
  return event;
}

void CudaQueue::finish() { device_->synchronize(); }

}  // namespace svod
