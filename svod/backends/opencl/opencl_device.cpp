#include "svod/backends/opencl/opencl_device.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/backends/opencl/opencl_api.h"

namespace svod {

using detail::check_cl;
using detail::cl_device_string;
using detail::cl_platform_string;
using detail::cl_status_text;
using detail::opencl_api;

namespace {

struct Located {
  cl_platform_id platform;
  cl_device_id device;
};

template <typename T>
T device_value(cl_device_id device, cl_device_info what) {
  T value{};
  opencl_api().clGetDeviceInfo(device, what, sizeof(T), &value, nullptr);
  return value;
}

// Every device of every platform, in the loader's order.
std::vector<Located> locate_devices() {
  const auto& cl = opencl_api();
  cl_uint count = 0;
  const cl_int status = cl.clGetPlatformIDs(0, nullptr, &count);
  if (status == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (status == CL_SUCCESS && count == 0))
    throw make_error(ErrorKind::DeviceUnavailable,
                     "no OpenCL platform is installed (the ICD loader found none; install e.g. pocl-opencl-icd)");
  check_cl(status, "clGetPlatformIDs", ErrorKind::DeviceUnavailable);
  std::vector<cl_platform_id> platforms(count);
  check_cl(cl.clGetPlatformIDs(count, platforms.data(), nullptr), "clGetPlatformIDs", ErrorKind::DeviceUnavailable);
  std::vector<Located> out;
  for (cl_platform_id p : platforms) {
    cl_uint n = 0;
    if (cl.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
    std::vector<cl_device_id> ids(n);
    if (cl.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr) != CL_SUCCESS) continue;
    for (cl_device_id d : ids) out.push_back({p, d});
  }
  return out;
}

OpenClDeviceDetails describe(const Located& at) {
  OpenClDeviceDetails d;
  d.platform = cl_platform_string(at.platform, CL_PLATFORM_NAME);
  d.name = cl_device_string(at.device, CL_DEVICE_NAME);
  d.version = cl_device_string(at.device, CL_DEVICE_VERSION);
  const auto type = device_value<cl_device_type>(at.device, CL_DEVICE_TYPE);
  d.type = (type & CL_DEVICE_TYPE_GPU) ? "GPU" : (type & CL_DEVICE_TYPE_CPU) ? "CPU"
           : (type & CL_DEVICE_TYPE_ACCELERATOR)  ? "accelerator"
                                                  : "other";
  d.compute_units = device_value<cl_uint>(at.device, CL_DEVICE_MAX_COMPUTE_UNITS);
  d.max_work_group_size = device_value<size_t>(at.device, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  d.base_alignment = std::max<size_t>(1, device_value<cl_uint>(at.device, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
  d.global_memory = device_value<cl_ulong>(at.device, CL_DEVICE_GLOBAL_MEM_SIZE);
  return d;
}

std::string description(const OpenClDeviceDetails& d) {
  return fmt::format("{} ({}, {}), {} compute units, {} MiB, {}", d.name, d.type, d.platform, d.compute_units,
                     d.global_memory >> 20, d.version);
}

// One context per platform holding all of its devices, so that their queues
// can wait on each other's events. Contexts live for the process.
cl_context platform_context(cl_platform_id platform) {
  static std::mutex mutex;
  static std::map<cl_platform_id, cl_context> contexts;
  std::lock_guard lock(mutex);
  if (auto it = contexts.find(platform); it != contexts.end()) return it->second;
  const auto& cl = opencl_api();
  cl_uint n = 0;
  check_cl(cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &n), "clGetDeviceIDs",
           ErrorKind::DeviceUnavailable);
  std::vector<cl_device_id> ids(n);
  check_cl(cl.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr), "clGetDeviceIDs",
           ErrorKind::DeviceUnavailable);
  const cl_context_properties properties[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(platform),
                                              0};
  cl_int status = CL_SUCCESS;
  cl_context context = cl.clCreateContext(properties, n, ids.data(), nullptr, nullptr, &status);
  check_cl(status, "clCreateContext", ErrorKind::DeviceUnavailable);
  contexts.emplace(platform, context);
  return context;
}

int64_t checked_product(int64_t a, int64_t b, size_t dim, const std::string& program) {
  int64_t out = 0;
  if (a < 1 || b < 1 || __builtin_mul_overflow(a, b, &out))
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": dimension {} has {} work-groups of {} work-items; both must be >= 1 and their "
                     "product fit in 64 bits",
                     program, dim, a, b);
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
    if (event_) opencl_api().clReleaseEvent(event_);
    event_ = other.event_;
    context_ = other.context_;
    other.event_ = nullptr;
  }
  return *this;
}

OpenClEvent::~OpenClEvent() {
  if (event_) opencl_api().clReleaseEvent(event_);
}

void OpenClEvent::wait() const {
  if (!event_) return;
  const auto& cl = opencl_api();
  const cl_int status = cl.clWaitForEvents(1, &event_);
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

// ---- OpenClStorage -------------------------------------------------------------

OpenClStorage::OpenClStorage(OpenClDevice& device, size_t bytes, detail::ClHandle<cl_mem> memory)
    : Storage(device, bytes), memory_(std::move(memory)) {}

_cl_mem* OpenClStorage::memory_at(size_t offset) {
  if (offset == 0) return memory_.get();
  std::lock_guard lock(mutex_);
  if (auto it = sub_buffers_.find(offset); it != sub_buffers_.end()) return it->second.get();
  auto& device = static_cast<OpenClDevice&>(this->device());
  const size_t align = device.details().base_alignment;
  if (offset % align != 0)
    throw make_error(ErrorKind::Unsupported,
                     "a view at byte offset {} cannot be a kernel argument on {}: OpenCL sub-buffers start at "
                     "multiples of {} bytes (the device's base address alignment)",
                     offset, device.name(), align);
  const cl_buffer_region region{offset, bytes() - offset};
  cl_int status = CL_SUCCESS;
  detail::ClHandle<cl_mem> sub(opencl_api().clCreateSubBuffer(memory_.get(), CL_MEM_READ_WRITE,
                                                             CL_BUFFER_CREATE_TYPE_REGION, &region, &status));
  check_cl(status, fmt::format("creating a sub-buffer at byte {} on {}", offset, device.name()));
  return sub_buffers_.emplace(offset, std::move(sub)).first->second.get();
}

// ---- OpenClProgram -------------------------------------------------------------

OpenClProgram::OpenClProgram(OpenClDevice& device, ProgramSpec spec, detail::ClHandle<cl_program> program,
                             detail::ClHandle<cl_kernel> kernel)
    : Program(std::move(spec)),
      device_(&device),
      program_(std::move(program)),
      kernel_(std::move(kernel)),
      layout_(this->spec()) {}

Device& OpenClProgram::device() const noexcept { return *device_; }

OpenClEvent OpenClProgram::enqueue(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                                   std::span<cl_event const> waits, const LaunchDims* dims) const {
  const std::string& program = spec().display_name();
  const size_t nbuf = layout_.buffer_count();
  if (buffers.size() != nbuf)
    throw make_error(ErrorKind::Validation, "program \"{}\" takes {} buffers, got {}", program, nbuf, buffers.size());
  std::vector<int64_t> abi(layout_.scalar_count());
  layout_.fill_scalars(scalars, abi.data());
  std::vector<cl_mem> memories(nbuf);
  for (size_t i = 0; i < nbuf; ++i) {
    check_launch_buffer(spec(), layout_, i, buffers[i], abi.data());
    memories[i] = device_->memory_of(buffers[i], fmt::format("program \"{}\": buffer {} (\"{}\")", program, i,
                                                     spec().buffers[i].name));
  }
  const LaunchDims sizes = dims ? *dims : this->dims(scalars);
  size_t global[3], local[3];
  for (size_t d = 0; d < 3; ++d) {
    global[d] = static_cast<size_t>(checked_product(sizes.global[d], sizes.local[d], d, program));
    local[d] = static_cast<size_t>(sizes.local[d]);
  }
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
    check_cl(cl.clEnqueueNDRangeKernel(device_->command_queue(), kernel_.get(), 3, nullptr, global, local,
                                       static_cast<cl_uint>(waits.size()), waits.empty() ? nullptr : waits.data(),
                                       &event),
             fmt::format("program \"{}\": launching {}x{}x{} work-groups of {}x{}x{} on {}", program, sizes.global[0],
                         sizes.global[1], sizes.global[2], sizes.local[0], sizes.local[1], sizes.local[2],
                         device_->name()));
  }
  // Without a flush an implementation may hold the command back until the
  // queue fills, and nothing waiting on its event would make progress.
  cl.clFlush(device_->command_queue());
  if (debug_level() >= 2) logger().debug("launch {} on {}", program, device_->name());
  return OpenClEvent(event, device_->context());
}

void OpenClProgram::launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                           const LaunchDims* dims) const {
  enqueue(buffers, scalars, {}, dims).wait();
}

std::chrono::nanoseconds OpenClProgram::time_launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                                                    const LaunchDims* dims) const {
  return enqueue(buffers, scalars, {}, dims).duration();
}

// ---- OpenClQueue ---------------------------------------------------------------

Device& OpenClQueue::device() const noexcept { return *device_; }

bool OpenClQueue::can_wait_on(const Queue& other) const noexcept {
  const auto* queue = dynamic_cast<const OpenClQueue*>(&other);
  return queue && queue->device_->shares_context(*device_);
}

std::vector<cl_event> OpenClQueue::device_waits(std::span<const EventPtr> waits) const {
  std::vector<cl_event> out;
  out.reserve(waits.size());
  for (const EventPtr& e : waits) {
    if (!e) continue;
    const auto* cl = dynamic_cast<const OpenClEvent*>(e.get());
    if (cl && cl->valid() && cl->context() == device_->context())
      out.push_back(cl->handle());
    else
      e->wait();
  }
  return out;
}

EventPtr OpenClQueue::launch(const Program& program, std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                             const LaunchDims* dims, std::span<const EventPtr> waits) {
  if (&program.device() != device_)
    throw make_error(ErrorKind::Validation, "program \"{}\" belongs to {}, not to the queue of {}",
                     program.spec().display_name(), program.device().name(), device_->name());
  const std::vector<cl_event> list = device_waits(waits);
  return std::make_shared<OpenClEvent>(static_cast<const OpenClProgram&>(program).enqueue(buffers, scalars, list, dims));
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
  return std::make_shared<OpenClEvent>(device_->enqueue_copy(dst, src, list));
}

EventPtr OpenClQueue::record(std::span<const EventPtr> waits) {
  const std::vector<cl_event> list = device_waits(waits);
  cl_event marker = nullptr;
  // On an in-order queue a marker also holds back everything after it.
  check_cl(opencl_api().clEnqueueMarkerWithWaitList(device_->command_queue(), static_cast<cl_uint>(list.size()),
                                                    list.empty() ? nullptr : list.data(), &marker),
           fmt::format("{}: clEnqueueMarkerWithWaitList", device_->name()));
  flush();
  return std::make_shared<OpenClEvent>(marker, device_->context());
}

void OpenClQueue::flush() { check_cl(opencl_api().clFlush(device_->command_queue()), "clFlush"); }

void OpenClQueue::finish() { device_->synchronize(); }

// ---- OpenClDevice --------------------------------------------------------------

OpenClDevice::OpenClDevice(size_t index) : index_(index) {
  const auto located = locate_devices();
  if (index >= located.size())
    throw make_error(ErrorKind::DeviceUnavailable, "CL:{}: this machine has {} OpenCL device(s)", index,
                     located.size());
  id_ = located[index].device;
  details_ = describe(located[index]);
  context_ = platform_context(located[index].platform);
  cl_int status = CL_SUCCESS;
  queue_ = detail::ClHandle<cl_command_queue>(
      opencl_api().clCreateCommandQueue(context_, id_, CL_QUEUE_PROFILING_ENABLE, &status));
  check_cl(status, fmt::format("CL:{}: creating the command queue", index), ErrorKind::DeviceUnavailable);
  compiler_ = std::make_unique<OpenClCompiler>(context_, id_, name());
}

OpenClDevice::~OpenClDevice() { opencl_api().clFinish(queue_.get()); }

std::string OpenClDevice::name() const { return fmt::format("CL:{}", index_); }

Buffer OpenClDevice::allocate(DType dtype, size_t count) {
  const size_t elem = size_of(dtype);
  if (count > SIZE_MAX / elem)
    throw make_error(ErrorKind::Validation, "buffer of {} {} elements is too large", count, to_string(dtype));
  const size_t bytes = count * elem;
  const size_t allocated = std::max<size_t>(bytes, 1);  // OpenCL refuses empty buffers
  const auto& cl = opencl_api();
  cl_int status = CL_SUCCESS;
  detail::ClHandle<cl_mem> memory(cl.clCreateBuffer(context_, CL_MEM_READ_WRITE, allocated, nullptr, &status));
  check_cl(status, fmt::format("{}: allocating {} bytes", name(), bytes));
  auto storage = std::make_shared<OpenClStorage>(*this, bytes, std::move(memory));
  const cl_uchar zero = 0;
  cl_event fill = nullptr;
  check_cl(cl.clEnqueueFillBuffer(queue_.get(), storage->memory(), &zero, 1, 0, allocated, 0, nullptr, &fill),
           fmt::format("{}: zero-filling {} bytes", name(), bytes));
  OpenClEvent(fill).wait();
  return Buffer(std::move(storage), dtype);
}

std::span<const Language> OpenClDevice::languages() const noexcept {
  static constexpr Language kLanguages[] = {Language::OpenCl};
  return kLanguages;
}

std::shared_ptr<const Program> OpenClDevice::load(const ProgramSpec& spec, const Artifact& artifact) {
  if (artifact.kind != ArtifactKind::OpenClBinary)
    throw make_error(ErrorKind::Load, "program \"{}\": {} loads OpenCL program binaries", spec.display_name(), name());
  const auto& cl = opencl_api();
  const auto* bytes = reinterpret_cast<const unsigned char*>(artifact.bytes.data());
  const size_t size = artifact.bytes.size();
  cl_int binary_status = CL_SUCCESS;
  cl_int status = CL_SUCCESS;
  detail::ClHandle<cl_program> program(
      cl.clCreateProgramWithBinary(context_, 1, &id_, &size, &bytes, &binary_status, &status));
  if (status != CL_SUCCESS || binary_status != CL_SUCCESS)
    throw make_error(ErrorKind::Load, "program \"{}\": {} refuses the stored binary: {}", spec.display_name(), name(),
                     cl_status_text(status != CL_SUCCESS ? status : binary_status));
  const std::string options = opencl_build_options(spec);
  status = cl.clBuildProgram(program.get(), 1, &id_, options.c_str(), nullptr, nullptr);
  if (status != CL_SUCCESS)
    throw make_error(ErrorKind::Load, "program \"{}\": {} cannot build the stored binary: {}", spec.display_name(),
                     name(), cl_status_text(status));
  detail::ClHandle<cl_kernel> kernel(cl.clCreateKernel(program.get(), spec.entry.c_str(), &status));
  if (status == CL_INVALID_KERNEL_NAME)
    throw make_error(ErrorKind::UndefinedSymbol, "program \"{}\" has no __kernel named \"{}\"", spec.display_name(),
                     spec.entry);
  check_cl(status, fmt::format("program \"{}\": clCreateKernel", spec.display_name()));
  cl_uint args = 0;
  cl.clGetKernelInfo(kernel.get(), CL_KERNEL_NUM_ARGS, sizeof(args), &args, nullptr);
  const size_t declared = spec.buffers.size() + spec.scalars.size();
  if (args != declared)
    throw make_error(ErrorKind::Validation, "program \"{}\": kernel \"{}\" takes {} arguments, the spec declares {}",
                     spec.display_name(), spec.entry, args, declared);
  if (debug_level() >= 1)
    logger().debug("loaded OpenCL program {} on {} from a {} byte binary", spec.display_name(), name(), size);
  return std::make_shared<OpenClProgram>(*this, spec, std::move(program), std::move(kernel));
}

bool OpenClDevice::owns(const Buffer& buffer) const noexcept {
  const auto* storage = dynamic_cast<const OpenClStorage*>(&buffer.storage());
  return storage && static_cast<const OpenClDevice&>(storage->device()).shares_context(*this);
}

_cl_mem* OpenClDevice::memory_of(const Buffer& buffer, std::string_view what) const {
  auto* storage = dynamic_cast<OpenClStorage*>(&buffer.storage());
  if (!storage || !static_cast<const OpenClDevice&>(storage->device()).shares_context(*this))
    throw make_error(ErrorKind::Validation, "{} is on {}; {} takes buffers of its own OpenCL context (copy it first)",
                     what, buffer.device().name(), name());
  return storage->memory_at(buffer.byte_offset());
}

bool OpenClDevice::direct_copy(const Buffer& dst, const Buffer& src) const noexcept {
  if (dst.bytes() != src.bytes()) return false;
  const bool dst_here = owns(dst);
  const bool src_here = owns(src);
  if (dst_here && src_here) return &dst.storage() != &src.storage() || !dst.overlaps(src);
  return (dst_here && src.is_host()) || (src_here && dst.is_host());
}

OpenClEvent OpenClDevice::enqueue_copy(const Buffer& dst, const Buffer& src, std::span<cl_event const> waits) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  if (!direct_copy(dst, src))
    throw make_error(ErrorKind::Unsupported, "{} cannot copy {} -> {} in one command; use copy(), which stages it",
                     name(), src.device().name(), dst.device().name());
  const auto& cl = opencl_api();
  const auto count = static_cast<cl_uint>(waits.size());
  const cl_event* list = waits.empty() ? nullptr : waits.data();
  cl_event event = nullptr;
  const size_t bytes = src.bytes();
  if (bytes == 0) {
    // Nothing to move, but the caller still gets an event ordered after `waits`.
    check_cl(cl.clEnqueueMarkerWithWaitList(queue_.get(), count, list, &event), fmt::format("{}: empty copy", name()));
  } else if (dst.is_host()) {
    auto& storage = static_cast<OpenClStorage&>(src.storage());
    check_cl(cl.clEnqueueReadBuffer(queue_.get(), storage.memory(), CL_FALSE, src.byte_offset(), bytes, dst.data(), count,
                                    list, &event),
             fmt::format("{}: reading {} bytes to the host", name(), bytes));
  } else if (src.is_host()) {
    auto& storage = static_cast<OpenClStorage&>(dst.storage());
    check_cl(cl.clEnqueueWriteBuffer(queue_.get(), storage.memory(), CL_FALSE, dst.byte_offset(), bytes, src.data(), count,
                                     list, &event),
             fmt::format("{}: writing {} bytes from the host", name(), bytes));
  } else {
    auto& from = static_cast<OpenClStorage&>(src.storage());
    auto& to = static_cast<OpenClStorage&>(dst.storage());
    check_cl(cl.clEnqueueCopyBuffer(queue_.get(), from.memory(), to.memory(), src.byte_offset(), dst.byte_offset(), bytes,
                                    count, list, &event),
             fmt::format("{}: copying {} bytes {} -> {}", name(), bytes, src.device().name(), dst.device().name()));
  }
  cl.clFlush(queue_.get());
  return OpenClEvent(event, context_);
}

void OpenClDevice::copy(const Buffer& dst, const Buffer& src) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  if (direct_copy(dst, src)) {
    enqueue_copy(dst, src).wait();
    return;
  }
  copy_through_host(dst, src);
}

void OpenClDevice::synchronize() { check_cl(opencl_api().clFinish(queue_.get()), fmt::format("{}: clFinish", name())); }

std::vector<DeviceInfo> enumerate_opencl_devices() {
  const auto located = locate_devices();
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < located.size(); ++i) out.push_back({fmt::format("CL:{}", i), description(describe(located[i]))});
  return out;
}

DeviceKind opencl_device_kind() {
  DeviceKind kind;
  kind.name = "CL";
  kind.enumerate = enumerate_opencl_devices;
  kind.create = [](size_t index) -> std::shared_ptr<Device> { return std::make_shared<OpenClDevice>(index); };
  return kind;
}

}  // namespace svod
