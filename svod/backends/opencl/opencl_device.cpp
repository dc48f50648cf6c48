// The OpenCL device itself: finding it among the platforms, its context,
// command queue and compiler (its state), memory, programs loaded from
// binaries, copies, and the registry's "CL" kind. Launches and events are in
// opencl_queue.cpp.
#include "svod/backends/opencl/opencl_device.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/backends/opencl/opencl_api.h"
#include "svod/backends/opencl/opencl_internal.h"

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

// Every device of every platform, in the loader's order.
std::vector<Located> query_devices() {
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

struct Found {
  Located at;
  OpenClDeviceDetails details;
};

// The devices and their details, found once for the process: ICD loaders and
// drivers (PoCL) crash when two threads enumerate at once, and the platforms
// do not change while it runs. A failure is not kept; the next call asks
// again.
const std::vector<Found>& found_devices() {
  static const std::vector<Found> found = [] {
    std::vector<Found> out;
    for (const Located& at : query_devices()) out.push_back({at, describe(at)});
    return out;
  }();
  return found;
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

// The device's in-order command queue, with profiling (events time their
// commands).
detail::ClHandle<cl_command_queue> make_command_queue(cl_context context, cl_device_id id, const std::string& device) {
  cl_int status = CL_SUCCESS;
  detail::ClHandle<cl_command_queue> queue(
      opencl_api().clCreateCommandQueue(context, id, CL_QUEUE_PROFILING_ENABLE, &status));
  check_cl(status, fmt::format("{}: creating the command queue", device), ErrorKind::DeviceUnavailable);
  return queue;
}

}  // namespace

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

// ---- the OpenCL state ----------------------------------------------------------

namespace detail {

OpenClDeviceState::OpenClDeviceState(OpenClDevice& owner, cl_platform_id platform, cl_device_id id)
    : owner(owner),
      id(id),
      context(platform_context(platform)),
      command_queue(make_command_queue(context, id, owner.name())),
      compiler(context, id, owner.name()),
      queue(owner) {}

OpenClDeviceState::~OpenClDeviceState() { opencl_api().clFinish(command_queue.get()); }

OpenClStorage* OpenClDeviceState::storage_of(const Buffer& buffer) const noexcept {
  auto* storage = dynamic_cast<OpenClStorage*>(&buffer.storage());
  if (!storage || static_cast<const OpenClDevice&>(storage->device()).state().context != context) return nullptr;
  return storage;
}

cl_mem OpenClDeviceState::memory_of(const Buffer& buffer, std::string_view what) const {
  OpenClStorage* storage = storage_of(buffer);
  if (!storage)
    throw make_error(ErrorKind::Validation, "{} is on {}; {} takes buffers of its own OpenCL context (copy it first)",
                     what, buffer.device().name(), owner.name());
  return storage->memory_at(buffer.byte_offset());
}

OpenClEvent OpenClDeviceState::enqueue_copy(const Buffer& dst, const Buffer& src, std::span<cl_event const> waits) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  if (!owner.direct_copy(dst, src))
    throw make_error(ErrorKind::Unsupported, "{} cannot copy {} -> {} in one command; use copy(), which stages it",
                     owner.name(), src.device().name(), dst.device().name());
  const auto& cl = opencl_api();
  const auto count = static_cast<cl_uint>(waits.size());
  const cl_event* list = waits.empty() ? nullptr : waits.data();
  cl_event event = nullptr;
  const size_t bytes = src.bytes();
  if (bytes == 0) {
    // Nothing to move, but the caller still gets an event ordered after `waits`.
    check_cl(cl.clEnqueueMarkerWithWaitList(command_queue.get(), count, list, &event),
             fmt::format("{}: empty copy", owner.name()));
  } else if (dst.is_host()) {
    auto& storage = static_cast<OpenClStorage&>(src.storage());
    check_cl(cl.clEnqueueReadBuffer(command_queue.get(), storage.memory(), CL_FALSE, src.byte_offset(), bytes,
                                    dst.data(), count, list, &event),
             fmt::format("{}: reading {} bytes to the host", owner.name(), bytes));
  } else if (src.is_host()) {
    auto& storage = static_cast<OpenClStorage&>(dst.storage());
    check_cl(cl.clEnqueueWriteBuffer(command_queue.get(), storage.memory(), CL_FALSE, dst.byte_offset(), bytes,
                                     src.data(), count, list, &event),
             fmt::format("{}: writing {} bytes from the host", owner.name(), bytes));
  } else {
    auto& from = static_cast<OpenClStorage&>(src.storage());
    auto& to = static_cast<OpenClStorage&>(dst.storage());
    check_cl(cl.clEnqueueCopyBuffer(command_queue.get(), from.memory(), to.memory(), src.byte_offset(),
                                    dst.byte_offset(), bytes, count, list, &event),
             fmt::format("{}: copying {} bytes {} -> {}", owner.name(), bytes, src.device().name(),
                         dst.device().name()));
  }
  cl.clFlush(command_queue.get());
  return OpenClEvent(event, context);
}

}  // namespace detail

// ---- OpenClDevice --------------------------------------------------------------

OpenClDevice::OpenClDevice(size_t index) : index_(index) {
  const auto& found = found_devices();
  if (index >= found.size())
    throw make_error(ErrorKind::DeviceUnavailable, "CL:{}: this machine has {} OpenCL device(s)", index, found.size());
  details_ = found[index].details;
  state_ = std::make_unique<detail::OpenClDeviceState>(*this, found[index].at.platform, found[index].at.device);
}

OpenClDevice::~OpenClDevice() { free_cached(); }  // its storages free through the driver state

std::string OpenClDevice::name() const { return fmt::format("CL:{}", index_); }

Queue& OpenClDevice::queue() { return state_->queue; }

const Compiler& OpenClDevice::compiler() const { return state_->compiler; }

Buffer OpenClDevice::allocate(DType dtype, size_t count) {
  const size_t bytes = checked_byte_size(dtype, count);
  const size_t allocated = std::max<size_t>(bytes, 1);  // OpenCL refuses empty buffers
  const auto& cl = opencl_api();
  cl_int status = CL_SUCCESS;
  detail::ClHandle<cl_mem> memory(cl.clCreateBuffer(state_->context, CL_MEM_READ_WRITE, allocated, nullptr, &status));
  check_cl(status, fmt::format("{}: allocating {} bytes", name(), bytes));
  auto storage = std::make_shared<OpenClStorage>(*this, bytes, std::move(memory));
  const cl_uchar zero = 0;
  cl_event fill = nullptr;
  check_cl(cl.clEnqueueFillBuffer(state_->command_queue.get(), storage->memory(), &zero, 1, 0, allocated, 0, nullptr,
                                  &fill),
           fmt::format("{}: zero-filling {} bytes", name(), bytes));
  OpenClEvent(fill).wait();
  return Buffer(std::move(storage), dtype);
}

std::span<const Language> OpenClDevice::languages() const noexcept {
  static constexpr Language kLanguages[] = {kOpenClLanguage};
  return kLanguages;
}

std::shared_ptr<const Program> OpenClDevice::load(const ProgramSpec& spec, const Artifact& artifact) {
  if (artifact.kind != kOpenClBinary)
    throw make_error(ErrorKind::Load, "program \"{}\": {} loads OpenCL program binaries", spec.display_name(), name());
  const auto& cl = opencl_api();
  const auto* bytes = reinterpret_cast<const unsigned char*>(artifact.bytes.data());
  const size_t size = artifact.bytes.size();
  cl_int binary_status = CL_SUCCESS;
  cl_int status = CL_SUCCESS;
  detail::ClHandle<cl_program> program(
      cl.clCreateProgramWithBinary(state_->context, 1, &state_->id, &size, &bytes, &binary_status, &status));
  if (status != CL_SUCCESS || binary_status != CL_SUCCESS)
    throw make_error(ErrorKind::Load, "program \"{}\": {} refuses the stored binary: {}", spec.display_name(), name(),
                     cl_status_text(status != CL_SUCCESS ? status : binary_status));
  const std::string options = opencl_build_options(spec);
  status = cl.clBuildProgram(program.get(), 1, &state_->id, options.c_str(), nullptr, nullptr);
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
    log_debug("loaded OpenCL program {} on {} from a {} byte binary", spec.display_name(), name(), size);
  return std::make_shared<OpenClProgram>(*this, spec, std::move(program), std::move(kernel));
}

bool OpenClDevice::direct_copy(const Buffer& dst, const Buffer& src) const noexcept {
  if (dst.bytes() != src.bytes()) return false;
  const bool dst_here = state_->storage_of(dst) != nullptr;
  const bool src_here = state_->storage_of(src) != nullptr;
  if (dst_here && src_here) return &dst.storage() != &src.storage() || !dst.overlaps(src);
  return (dst_here && src.is_host()) || (src_here && dst.is_host());
}

void OpenClDevice::copy(const Buffer& dst, const Buffer& src) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  if (direct_copy(dst, src)) {
    state_->enqueue_copy(dst, src).wait();
    return;
  }
  copy_through_host(dst, src);
}

void OpenClDevice::synchronize() {
  check_cl(opencl_api().clFinish(state_->command_queue.get()), fmt::format("{}: clFinish", name()));
}

std::vector<DeviceInfo> enumerate_opencl_devices() {
  const auto& found = found_devices();
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < found.size(); ++i) out.push_back({fmt::format("CL:{}", i), description(found[i].details)});
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
