#include "svod/backends/cuda/cuda_device.h"

#include <algorithm>
#include <cstring>

#include "svod/base/error.h"
#include "svod/base/log.h"
#include "svod/backends/cuda/nvrtc_compiler.h"

namespace svod {

using detail::check_cu;
using detail::cu_status_text;
using detail::cuda_driver;

namespace {

// Bytes per pinned staging half: large enough that the per-chunk driver
// overhead vanishes against the transfer, small enough to stay resident.
constexpr size_t kStagingBytes = size_t{8} << 20;
// Instantiated graphs kept per device (least recently used dropped first).
constexpr size_t kMaxGraphs = 32;

std::string describe(const CudaDeviceDetails& d) {
  return fmt::format("{} (sm_{}{}), {} SMs, {} MiB, driver {}.{}", d.name, d.compute_major, d.compute_minor,
                     d.multiprocessors, d.global_memory >> 20, d.driver_version / 1000, d.driver_version % 1000 / 10);
}

CudaDeviceDetails query(const detail::CudaDriverApi& api, cu::CUdevice device) {
  CudaDeviceDetails d;
  char name[256] = {};
  if (api.cuDeviceGetName(name, sizeof(name) - 1, device) == cu::CUDA_SUCCESS) d.name = name;
  api.cuDeviceGetAttribute(&d.compute_major, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  api.cuDeviceGetAttribute(&d.compute_minor, cu::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  api.cuDeviceGetAttribute(&d.multiprocessors, cu::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  api.cuDeviceGetAttribute(&d.max_threads_per_block, cu::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
  size_t bytes = 0;
  if (api.cuDeviceTotalMem(&bytes, device) == cu::CUDA_SUCCESS) d.global_memory = bytes;
  d.driver_version = api.driver_version;
  return d;
}

int device_count(const detail::CudaDriverApi& api) {
  int count = 0;
  check_cu(api.cuDeviceGetCount(&count), "cuDeviceGetCount", ErrorKind::DeviceUnavailable);
  return count;
}

// Launch sizes as the driver takes them: each in [1, 2^32).
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

}  // namespace

// ---- storage -------------------------------------------------------------------

CudaStorage::CudaStorage(CudaDevice& device, size_t bytes, cu::CUdeviceptr pointer)
    : Storage(device, bytes), pointer_(pointer) {}

CudaStorage::~CudaStorage() {
  // Errors are ignored: at process exit the driver may already be shut down.
  const auto& owner = static_cast<CudaDevice&>(device());
  owner.make_current();
  owner.api().cuMemFree(pointer_);
}

CudaPinnedStorage::CudaPinnedStorage(CudaDevice& device, size_t bytes, void* host) : Storage(device, bytes, host) {}

CudaPinnedStorage::~CudaPinnedStorage() {
  const auto& owner = static_cast<CudaDevice&>(device());
  owner.make_current();
  owner.api().cuMemFreeHost(host_data());
}

// ---- CudaProgram -----------------------------------------------------------------

CudaProgram::CudaProgram(CudaDevice& device, ProgramSpec spec, cu::CUmodule module, cu::CUfunction function)
    : Program(std::move(spec)), device_(&device), module_(module), function_(function), layout_(this->spec()) {}

CudaProgram::~CudaProgram() {
  device_->make_current();
  device_->api().cuModuleUnload(module_);
}

Device& CudaProgram::device() const noexcept { return *device_; }

void CudaProgram::prepare(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                          CudaKernelParams& out) const {
  const std::string& program = spec().display_name();
  const size_t nbuf = layout_.buffer_count();
  if (buffers.size() != nbuf)
    throw make_error(ErrorKind::Validation, "program \"{}\" takes {} buffers, got {}", program, nbuf, buffers.size());
  std::array<int64_t, CudaKernelParams::kMaxParams> abi{};
  if (layout_.scalar_count() > abi.size())
    throw make_error(ErrorKind::Validation, "program \"{}\" declares {} scalars; a CUDA kernel takes at most {}",
                     program, layout_.scalar_count(), abi.size());
  layout_.fill_scalars(scalars, abi.data());
  std::array<uint64_t, CudaKernelParams::kMaxParams> pointers{};
  if (nbuf > pointers.size())
    throw make_error(ErrorKind::Validation, "program \"{}\" declares {} buffers; a CUDA kernel takes at most {}",
                     program, nbuf, pointers.size());
  for (size_t i = 0; i < nbuf; ++i) {
    check_launch_buffer(spec(), layout_, i, buffers[i], abi.data());
    pointers[i] = device_->pointer_of(buffers[i], fmt::format("program \"{}\": buffer {} (\"{}\")", program, i,
                                                      spec().buffers[i].name));
  }
  out.pack({pointers.data(), nbuf}, spec().scalars, {abi.data(), layout_.scalar_count()});
}

void CudaProgram::enqueue(CudaKernelParams& params, const LaunchDims& dims) const {
  const auto d = driver_dims(dims, spec().display_name());
  check_cu(device_->api().cuLaunchKernel(function_, d[0], d[1], d[2], d[3], d[4], d[5], 0, device_->stream(),
                                        params.pointers(), nullptr),
           fmt::format("program \"{}\": launching {} on {}", spec().display_name(), dims_text(dims), device_->name()));
  if (debug_level() >= 2) logger().debug("launch {} on {}", spec().display_name(), device_->name());
}

void CudaProgram::launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                         const LaunchDims* dims) const {
  CudaKernelParams params;
  prepare(buffers, scalars, params);
  const LaunchDims sizes = dims ? *dims : this->dims(scalars);
  device_->make_current();
  enqueue(params, sizes);
  check_cu(device_->api().cuStreamSynchronize(device_->stream()),
           fmt::format("program \"{}\" failed on {}", spec().display_name(), device_->name()));
}

std::chrono::nanoseconds CudaProgram::time_launch(std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                                                  const LaunchDims* dims) const {
  CudaQueue& queue = static_cast<CudaQueue&>(device_->queue());
  return queue.launch(*this, buffers, scalars, dims)->duration();
}

// ---- events and the queue ------------------------------------------------------------

CudaEvent::CudaEvent(const CudaDevice& device) : device_(&device) {
  const auto& api = device.api();
  device.make_current();
  check_cu(api.cuEventCreate(&start_, cu::CU_EVENT_DEFAULT), fmt::format("{}: cuEventCreate", device.name()));
  if (const cu::CUresult status = api.cuEventCreate(&end_, cu::CU_EVENT_DEFAULT); status != cu::CUDA_SUCCESS) {
    api.cuEventDestroy(start_);
    check_cu(status, fmt::format("{}: cuEventCreate", device.name()));
  }
}

CudaEvent::~CudaEvent() {
  device_->make_current();
  device_->api().cuEventDestroy(start_);
  device_->api().cuEventDestroy(end_);
}

void CudaEvent::wait() const {
  device_->make_current();
  check_cu(device_->api().cuEventSynchronize(end_), fmt::format("a command on {} failed", device_->name()));
}

std::chrono::nanoseconds CudaEvent::duration() const {
  wait();
  float ms = 0;
  check_cu(device_->api().cuEventElapsedTime(&ms, start_, end_), "cuEventElapsedTime", ErrorKind::Unsupported);
  return std::chrono::nanoseconds(static_cast<int64_t>(static_cast<double>(ms) * 1e6));
}

Device& CudaQueue::device() const noexcept { return *device_; }

// cuStreamWaitEvent takes events of any context of the process.
bool CudaQueue::can_wait_on(const Queue& other) const noexcept { return dynamic_cast<const CudaQueue*>(&other); }

void CudaQueue::wait_for(std::span<const EventPtr> waits) {
  for (const EventPtr& e : waits) {
    if (!e) continue;
    if (const auto* cuda = dynamic_cast<const CudaEvent*>(e.get()))
      check_cu(device_->api().cuStreamWaitEvent(device_->stream(), cuda->end(), 0),
               fmt::format("{}: cuStreamWaitEvent", device_->name()));
    else
      e->wait();
  }
}

EventPtr CudaQueue::launch(const Program& program, std::span<const Buffer> buffers, std::span<const int64_t> scalars,
                           const LaunchDims* dims, std::span<const EventPtr> waits) {
  if (&program.device() != device_)
    throw make_error(ErrorKind::Validation, "program \"{}\" belongs to {}, not to the queue of {}",
                     program.spec().display_name(), program.device().name(), device_->name());
  const auto& cuda = static_cast<const CudaProgram&>(program);
  CudaKernelParams params;
  cuda.prepare(buffers, scalars, params);
  const LaunchDims sizes = dims ? *dims : cuda.dims(scalars);
  auto event = std::make_shared<CudaEvent>(*device_);  // makes the context current
  wait_for(waits);
  const auto& api = device_->api();
  check_cu(api.cuEventRecord(event->start(), device_->stream()), "cuEventRecord");
  cuda.enqueue(params, sizes);
  check_cu(api.cuEventRecord(event->end(), device_->stream()), "cuEventRecord");
  return event;
}

EventPtr CudaQueue::copy(const Buffer& dst, const Buffer& src, std::span<const EventPtr> waits) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  if (!device_->owns(dst) || !device_->owns(src) || (&dst.storage() == &src.storage() && dst.overlaps(src))) {
    // Host memory or another device: CudaDevice::copy stages and chunks it
    // on this stream, synchronously.
    wait_all(waits);
    device_->copy(dst, src);
    return nullptr;
  }
  auto event = std::make_shared<CudaEvent>(*device_);
  wait_for(waits);
  const auto& api = device_->api();
  check_cu(api.cuEventRecord(event->start(), device_->stream()), "cuEventRecord");
  if (src.bytes() > 0)
    check_cu(api.cuMemcpyDtoDAsync(device_->pointer_of(dst, "the destination"), device_->pointer_of(src, "the source"),
                                   src.bytes(), device_->stream()),
             fmt::format("{}: copying {} bytes", device_->name(), src.bytes()));
  check_cu(api.cuEventRecord(event->end(), device_->stream()), "cuEventRecord");
  return event;
}

EventPtr CudaQueue::record(std::span<const EventPtr> waits) {
  auto event = std::make_shared<CudaEvent>(*device_);
  // cuStreamWaitEvent holds back everything submitted to the stream later.
  wait_for(waits);
  check_cu(device_->api().cuEventRecord(event->start(), device_->stream()), "cuEventRecord");
  check_cu(device_->api().cuEventRecord(event->end(), device_->stream()), "cuEventRecord");
  return event;
}

void CudaQueue::finish() { device_->synchronize(); }

// ---- graphs ----------------------------------------------------------------------

// One instantiated graph: the shape it was built for (programs and edges),
// its nodes, and the parameters and sizes each node holds now.
struct CudaDevice::GraphEntry {
  explicit GraphEntry(const detail::CudaDriverApi& driver) : api(driver) {}
  GraphEntry(const GraphEntry&) = delete;
  GraphEntry& operator=(const GraphEntry&) = delete;

  const detail::CudaDriverApi& api;
  std::vector<std::shared_ptr<const Program>> programs;
  std::vector<std::vector<size_t>> after;
  cu::CUgraph graph = nullptr;
  cu::CUgraphExec exec = nullptr;
  std::vector<cu::CUgraphNode> nodes;
  std::vector<CudaKernelParams> params;
  std::vector<LaunchDims> dims;

  ~GraphEntry() {
    if (exec) api.cuGraphExecDestroy(exec);
    if (graph) api.cuGraphDestroy(graph);
  }

  bool matches(std::span<const KernelLaunch> kernels) const {
    if (kernels.size() != programs.size()) return false;
    for (size_t i = 0; i < kernels.size(); ++i)
      if (kernels[i].program != programs[i] || !std::ranges::equal(kernels[i].after, after[i])) return false;
    return true;
  }
};

namespace {

cu::KernelNodeParams node_params(const CudaProgram& program, CudaKernelParams& params, const LaunchDims& dims) {
  const auto d = driver_dims(dims, program.spec().display_name());
  cu::KernelNodeParams p;
  p.func = program.function();
  p.gridDimX = d[0];
  p.gridDimY = d[1];
  p.gridDimZ = d[2];
  p.blockDimX = d[3];
  p.blockDimY = d[4];
  p.blockDimZ = d[5];
  p.kernelParams = params.pointers();
  return p;
}

}  // namespace

void CudaDevice::run_graph(std::span<const KernelLaunch> kernels) {
  if (kernels.empty()) return;
  const auto& api = *api_;
  // Everything is checked and packed before the graph is touched.
  std::vector<CudaKernelParams> params(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto* program = dynamic_cast<const CudaProgram*>(kernels[i].program.get());
    if (!program || &program->device() != this)
      throw make_error(ErrorKind::Validation, "CUDA graph on {}: kernel {} is not a program of this device", name(), i);
    for (size_t p : kernels[i].after)
      if (p >= i)
        throw make_error(ErrorKind::Validation, "CUDA graph on {}: kernel {} waits for kernel {}, which is not earlier",
                         name(), i, p);
    program->prepare(kernels[i].buffers, kernels[i].scalars, params[i]);
    driver_dims(kernels[i].dims, program->spec().display_name());
  }
  make_current();
  std::lock_guard lock(graph_mutex_);
  auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const auto& e) { return e->matches(kernels); });
  bool updated = it != graphs_.end();
  if (updated) {
    graphs_.splice(graphs_.begin(), graphs_, it);  // most recently used first
    GraphEntry& entry = *graphs_.front();
    for (size_t i = 0; i < kernels.size() && updated; ++i) {
      if (entry.dims[i] == kernels[i].dims && entry.params[i].same_values(params[i])) continue;
      const auto& program = static_cast<const CudaProgram&>(*kernels[i].program);
      const cu::KernelNodeParams p = node_params(program, params[i], kernels[i].dims);
      if (api.cuGraphExecKernelNodeSetParams(entry.exec, entry.nodes[i], &p) != cu::CUDA_SUCCESS) {
        // The executable graph refused the change (e.g. sizes it cannot
        // take in place): build it again below.
        graphs_.pop_front();
        updated = false;
        break;
      }
      entry.params[i] = params[i];
      entry.dims[i] = kernels[i].dims;
      ++graph_stats_.node_updates;
    }
  }
  if (!updated) {
    auto entry = std::make_unique<GraphEntry>(api);
    check_cu(api.cuGraphCreate(&entry->graph, 0), fmt::format("{}: cuGraphCreate", name()));
    entry->nodes.resize(kernels.size());
    for (size_t i = 0; i < kernels.size(); ++i) {
      const auto& program = static_cast<const CudaProgram&>(*kernels[i].program);
      const cu::KernelNodeParams p = node_params(program, params[i], kernels[i].dims);
      std::vector<cu::CUgraphNode> deps;
      for (size_t a : kernels[i].after) deps.push_back(entry->nodes[a]);
      check_cu(api.cuGraphAddKernelNode(&entry->nodes[i], entry->graph, deps.empty() ? nullptr : deps.data(),
                                        deps.size(), &p),
               fmt::format("{}: adding kernel {} (\"{}\", {}) to a CUDA graph", name(), i,
                           program.spec().display_name(), dims_text(kernels[i].dims)));
      entry->programs.push_back(kernels[i].program);
      entry->after.emplace_back(kernels[i].after.begin(), kernels[i].after.end());
      entry->dims.push_back(kernels[i].dims);
    }
    entry->params = params;
    check_cu(api.cuGraphInstantiateWithFlags(&entry->exec, entry->graph, 0),
             fmt::format("{}: instantiating a CUDA graph of {} kernels", name(), kernels.size()));
    ++graph_stats_.instantiations;
    graphs_.push_front(std::move(entry));
    if (graphs_.size() > kMaxGraphs) graphs_.pop_back();
  }
  check_cu(api.cuGraphLaunch(graphs_.front()->exec, stream_),
           fmt::format("{}: launching a CUDA graph of {} kernels", name(), kernels.size()));
  ++graph_stats_.launches;
  wait_stream(fmt::format("a CUDA graph of {} kernels", kernels.size()));
}

bool CudaDevice::submit_graph(std::span<const KernelLaunch> kernels) {
  run_graph(kernels);
  return true;
}

bool CudaDevice::direct_copy(const Buffer& dst, const Buffer& src) const noexcept {
  if (!dst.valid() || !src.valid() || dst.bytes() != src.bytes()) return false;
  const bool dst_here = owns(dst), src_here = owns(src);
  return (dst_here && (src_here || src.is_host())) || (src_here && dst.is_host());
}

CudaGraphStats CudaDevice::graph_stats() const {
  std::lock_guard lock(graph_mutex_);
  return graph_stats_;
}

// ---- CudaDevice --------------------------------------------------------------------

CudaDevice::CudaDevice(size_t index) : api_(&cuda_driver()), index_(index) {
  const auto& api = *api_;
  const int count = device_count(api);
  if (index >= static_cast<size_t>(count))
    throw make_error(ErrorKind::DeviceUnavailable, "CUDA:{}: this machine has {} CUDA device(s)", index, count);
  check_cu(api.cuDeviceGet(&device_, static_cast<int>(index)), fmt::format("CUDA:{}: cuDeviceGet", index),
           ErrorKind::DeviceUnavailable);
  details_ = query(api, device_);
  check_cu(api.cuDevicePrimaryCtxRetain(&context_, device_),
           fmt::format("CUDA:{}: retaining the primary context", index), ErrorKind::DeviceUnavailable);
  make_current();
  // Non-blocking: svod's stream does not wait for work other code puts on the
  // legacy default stream.
  const cu::CUresult status = api.cuStreamCreate(&stream_, cu::CU_STREAM_NON_BLOCKING);
  if (status != cu::CUDA_SUCCESS) {
    api.cuDevicePrimaryCtxRelease(device_);
    check_cu(status, fmt::format("CUDA:{}: creating a stream", index), ErrorKind::DeviceUnavailable);
  }
}

CudaDevice::~CudaDevice() {
  // Registry devices are destroyed at process exit, when the driver may have
  // shut down already: then nothing is released (the process is ending).
  const auto& api = *api_;
  if (api.cuCtxSetCurrent(context_) != cu::CUDA_SUCCESS) return;
  api.cuStreamSynchronize(stream_);
  graphs_.clear();
  for (size_t i = 0; i < 2; ++i) {
    if (staging_done_[i]) api.cuEventDestroy(staging_done_[i]);
    if (staging_[i]) api.cuMemFreeHost(staging_[i]);
  }
  api.cuStreamDestroy(stream_);
  api.cuDevicePrimaryCtxRelease(device_);
}

std::string CudaDevice::name() const { return fmt::format("CUDA:{}", index_); }

void CudaDevice::make_current() const { api_->cuCtxSetCurrent(context_); }

void CudaDevice::wait_stream(std::string_view what) const {
  check_cu(api_->cuStreamSynchronize(stream_), fmt::format("{} failed on {}", what, name()));
}

Buffer CudaDevice::allocate(DType dtype, size_t count) {
  const size_t elem = size_of(dtype);
  if (count > SIZE_MAX / elem)
    throw make_error(ErrorKind::Validation, "buffer of {} {} elements is too large", count, to_string(dtype));
  const size_t bytes = count * elem;
  const size_t allocated = std::max<size_t>(bytes, 1);  // cuMemAlloc refuses 0 bytes
  const auto& api = *api_;
  make_current();
  cu::CUdeviceptr pointer = 0;
  check_cu(api.cuMemAlloc(&pointer, allocated), fmt::format("{}: allocating {} bytes", name(), bytes));
  auto storage = std::make_shared<CudaStorage>(*this, bytes, pointer);
  check_cu(api.cuMemsetD8Async(pointer, 0, allocated, stream_), fmt::format("{}: zero-filling {} bytes", name(), bytes));
  wait_stream("zero-filling a new buffer");
  return Buffer(std::move(storage), dtype);
}

Buffer CudaDevice::allocate_host(DType dtype, size_t count) {
  const size_t elem = size_of(dtype);
  if (count > SIZE_MAX / elem)
    throw make_error(ErrorKind::Validation, "buffer of {} {} elements is too large", count, to_string(dtype));
  const size_t bytes = count * elem;
  make_current();
  void* host = nullptr;
  check_cu(api_->cuMemHostAlloc(&host, std::max<size_t>(bytes, 1), cu::CU_MEMHOSTALLOC_PORTABLE),
           fmt::format("{}: allocating {} bytes of pinned host memory", name(), bytes));
  std::memset(host, 0, bytes);
  return Buffer(std::make_shared<CudaPinnedStorage>(*this, bytes, host), dtype);
}

std::span<const Language> CudaDevice::languages() const noexcept {
  static constexpr Language kLanguages[] = {Language::Cuda};
  return kLanguages;
}

const Compiler& CudaDevice::compiler() const {
  std::lock_guard lock(compiler_mutex_);
  if (!compiler_)
    compiler_ = std::make_shared<NvrtcCompiler>(cuda_sm_target(details_.compute_major, details_.compute_minor));
  return *compiler_;
}

void CudaDevice::check_spec(const ProgramSpec& spec) const {
  if (spec.core_id_index())
    throw make_error(ErrorKind::Validation,
                     "program \"{}\": core_id is the CPU's slice index; CUDA kernels use blockIdx and threadIdx instead",
                     spec.display_name());
}

std::string CudaDevice::artifact_mismatch(const CompilerIdentity& made_by) const {
  // A cubin runs on the architecture it was built for; the driver, not
  // NVRTC, loads it, so which NVRTC made it does not matter.
  const std::string here = cuda_sm_target(details_.compute_major, details_.compute_minor);
  if (made_by.backend != "nvrtc" || made_by.target_cpu != here || made_by.abi_version != CompilerIdentity{}.abi_version)
    return fmt::format("they were built by {} for {}, and {} is {} ({})", made_by.backend, made_by.target_cpu, name(),
                       here, details_.name);
  return {};
}

std::shared_ptr<const Program> CudaDevice::load(const ProgramSpec& spec, const Artifact& artifact) {
  if (artifact.kind != ArtifactKind::Ptx && artifact.kind != ArtifactKind::Cubin)
    throw make_error(ErrorKind::Load, "program \"{}\": {} loads PTX or cubins", spec.display_name(), name());
  const auto& api = *api_;
  make_current();
  cu::CUmodule module = nullptr;
  check_cu(api.cuModuleLoadData(&module, artifact.bytes.data()),
           fmt::format("program \"{}\": loading its {} on {} ({})", spec.display_name(),
                       artifact.kind == ArtifactKind::Ptx ? "PTX" : "cubin", name(), details_.name),
           ErrorKind::Load);
  cu::CUfunction function = nullptr;
  const cu::CUresult status = api.cuModuleGetFunction(&function, module, spec.entry.c_str());
  if (status != cu::CUDA_SUCCESS) {
    api.cuModuleUnload(module);
    if (status == cu::CUDA_ERROR_NOT_FOUND)
      throw make_error(ErrorKind::UndefinedSymbol,
                       "program \"{}\" has no kernel named \"{}\" (declare it extern \"C\" __global__ so its name is "
                       "not mangled)",
                       spec.display_name(), spec.entry);
    check_cu(status, fmt::format("program \"{}\": cuModuleGetFunction", spec.display_name()), ErrorKind::Load);
  }
  if (debug_level() >= 1) logger().debug("loaded CUDA program {} on {}", spec.display_name(), name());
  return std::make_shared<CudaProgram>(*this, spec, module, function);
}

bool CudaDevice::owns(const Buffer& buffer) const noexcept {
  return buffer.valid() && &buffer.device() == this && dynamic_cast<const CudaStorage*>(&buffer.storage());
}

cu::CUdeviceptr CudaDevice::pointer_of(const Buffer& buffer, std::string_view what) const {
  const auto* storage = dynamic_cast<const CudaStorage*>(&buffer.storage());
  if (!storage || &storage->device() != this)
    throw make_error(ErrorKind::Validation, "{} is on {}; {} takes buffers in its own memory (copy it first)", what,
                     buffer.device().name(), name());
  return storage->pointer() + buffer.byte_offset();
}

void CudaDevice::ensure_staging() {
  const auto& api = *api_;
  for (size_t i = 0; i < 2; ++i) {
    if (!staging_[i])
      check_cu(api.cuMemHostAlloc(&staging_[i], kStagingBytes, cu::CU_MEMHOSTALLOC_PORTABLE),
               fmt::format("{}: allocating a pinned staging buffer", name()));
    if (!staging_done_[i])
      check_cu(api.cuEventCreate(&staging_done_[i], cu::CU_EVENT_DISABLE_TIMING), "cuEventCreate");
  }
}

void CudaDevice::upload(cu::CUdeviceptr dst, const void* src, size_t bytes) {
  const auto& api = *api_;
  std::lock_guard lock(staging_mutex_);
  ensure_staging();
  // Chunk k is copied into half k % 2 once that half's previous transfer
  // finished, so the memcpy of one chunk overlaps the DMA of the other.
  const auto* from = static_cast<const std::byte*>(src);
  for (size_t offset = 0, k = 0; offset < bytes; offset += kStagingBytes, ++k) {
    const size_t half = k % 2;
    const size_t n = std::min(kStagingBytes, bytes - offset);
    if (k >= 2) check_cu(api.cuEventSynchronize(staging_done_[half]), fmt::format("{}: host-to-device copy", name()));
    std::memcpy(staging_[half], from + offset, n);
    check_cu(api.cuMemcpyHtoDAsync(dst + offset, staging_[half], n, stream_),
             fmt::format("{}: copying {} bytes to the device", name(), n));
    check_cu(api.cuEventRecord(staging_done_[half], stream_), "cuEventRecord");
  }
  wait_stream("a host-to-device copy");
}

void CudaDevice::download(void* dst, cu::CUdeviceptr src, size_t bytes) {
  const auto& api = *api_;
  std::lock_guard lock(staging_mutex_);
  ensure_staging();
  auto* to = static_cast<std::byte*>(dst);
  const size_t chunks = (bytes + kStagingBytes - 1) / kStagingBytes;
  auto issue = [&](size_t k) {
    const size_t offset = k * kStagingBytes;
    const size_t n = std::min(kStagingBytes, bytes - offset);
    check_cu(api.cuMemcpyDtoHAsync(staging_[k % 2], src + offset, n, stream_),
             fmt::format("{}: copying {} bytes to the host", name(), n));
    check_cu(api.cuEventRecord(staging_done_[k % 2], stream_), "cuEventRecord");
  };
  // The transfer of chunk k + 1 runs while chunk k is copied out.
  if (chunks > 0) issue(0);
  for (size_t k = 0; k < chunks; ++k) {
    if (k + 1 < chunks) issue(k + 1);
    check_cu(api.cuEventSynchronize(staging_done_[k % 2]), fmt::format("{}: device-to-host copy failed", name()));
    const size_t offset = k * kStagingBytes;
    std::memcpy(to + offset, staging_[k % 2], std::min(kStagingBytes, bytes - offset));
  }
}

void CudaDevice::copy(const Buffer& dst, const Buffer& src) {
  if (dst.bytes() != src.bytes())
    throw make_error(ErrorKind::Validation, "copy of {} bytes into a buffer of {} bytes: sizes must be equal",
                     src.bytes(), dst.bytes());
  const size_t bytes = src.bytes();
  if (bytes == 0) return;
  const bool dst_here = owns(dst);
  const bool src_here = owns(src);
  const auto& api = *api_;
  if (dst_here || src_here) make_current();
  if (dst_here && src_here && (&dst.storage() != &src.storage() || !dst.overlaps(src))) {
    check_cu(api.cuMemcpyDtoDAsync(pointer_of(dst, "copy destination"), pointer_of(src, "copy source"), bytes, stream_),
             fmt::format("{}: copying {} bytes within the device", name(), bytes));
    wait_stream("a device-to-device copy");
    return;
  }
  const bool pinned_src = dynamic_cast<const CudaPinnedStorage*>(&src.storage()) != nullptr;
  const bool pinned_dst = dynamic_cast<const CudaPinnedStorage*>(&dst.storage()) != nullptr;
  if (dst_here && src.is_host()) {
    if (pinned_src) {
      check_cu(api.cuMemcpyHtoDAsync(pointer_of(dst, "copy destination"), src.data(), bytes, stream_),
               fmt::format("{}: copying {} bytes from pinned memory", name(), bytes));
      wait_stream("a host-to-device copy");
    } else {
      upload(pointer_of(dst, "copy destination"), src.data(), bytes);
    }
    return;
  }
  if (src_here && dst.is_host()) {
    if (pinned_dst) {
      check_cu(api.cuMemcpyDtoHAsync(dst.data(), pointer_of(src, "copy source"), bytes, stream_),
               fmt::format("{}: copying {} bytes to pinned memory", name(), bytes));
      wait_stream("a device-to-host copy");
    } else {
      download(dst.data(), pointer_of(src, "copy source"), bytes);
    }
    return;
  }
  copy_through_host(dst, src);
}

void CudaDevice::synchronize() {
  make_current();
  wait_stream("work on the stream");
}

std::vector<DeviceInfo> enumerate_cuda_devices() {
  const auto& api = cuda_driver();
  const int count = device_count(api);
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cu::CUdevice device = 0;
    check_cu(api.cuDeviceGet(&device, i), fmt::format("CUDA:{}: cuDeviceGet", i), ErrorKind::DeviceUnavailable);
    out.push_back({fmt::format("CUDA:{}", i), describe(query(api, device))});
  }
  return out;
}

DeviceKind cuda_device_kind() {
  DeviceKind kind;
  kind.name = "CUDA";
  kind.enumerate = enumerate_cuda_devices;
  kind.create = [](size_t index) -> std::shared_ptr<Device> { return std::make_shared<CudaDevice>(index); };
  // CUDA C compiles without a GPU; the devices need the driver.
  kind.toolchain = []() -> std::string {
    try {
      const auto& nvrtc = detail::nvrtc_api();
      return fmt::format("nvrtc: {}.{} ({})", nvrtc.major, nvrtc.minor, nvrtc.path);
    } catch (const Error& e) {
      return fmt::format("nvrtc: none ({})", e.what());
    }
  };
  return kind;
}

}  // namespace svod
