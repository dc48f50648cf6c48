// CUDA graphs for plans made only of kernels: CudaDevice::run_graph checks and
// packs the kernels, and the device's CudaGraphCache builds, updates and
// replays the instantiated graphs.
#include <algorithm>
#include <memory>
#include <vector>

#include "svod/base/error.h"
#include "svod/backends/cuda/cuda_internal.h"

namespace svod {

using detail::check_cu;

namespace {

// Instantiated graphs kept per device (least recently used dropped first).
constexpr size_t kMaxGraphs = 32;

cu::KernelNodeParams node_params(const CudaProgram& program, CudaKernelParams& params, const LaunchDims& dims) {
  const auto d = detail::driver_dims(dims, program.spec().display_name());
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

namespace detail {

// One instantiated graph: the shape it was built for (programs and edges),
// its nodes, and the parameters and sizes each node holds now.
struct CudaGraphCache::Entry {
  explicit Entry(const CudaDriverApi& driver) : api(driver) {}
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;

  const CudaDriverApi& api;
  std::vector<std::shared_ptr<const Program>> programs;
  std::vector<std::vector<size_t>> after;
  cu::CUgraph graph = nullptr;
  cu::CUgraphExec exec = nullptr;
  std::vector<cu::CUgraphNode> nodes;
  std::vector<CudaKernelParams> params;
  std::vector<LaunchDims> dims;

  ~Entry() {
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

CudaGraphCache::CudaGraphCache(const CudaDeviceState& state) : state_(state) {}

CudaGraphCache::~CudaGraphCache() = default;

void CudaGraphCache::clear() { entries_.clear(); }

CudaGraphStats CudaGraphCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CudaGraphCache::run(std::span<const KernelLaunch> kernels, std::span<CudaKernelParams> params) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) { return e->matches(kernels); });
  bool updated = it != entries_.end();
  if (updated) {
    entries_.splice(entries_.begin(), entries_, it);  // most recently used first
    updated = update(*entries_.front(), kernels, params);
    // The executable graph refused a change (e.g. sizes it cannot take in
    // place): it is built again below.
    if (!updated) entries_.pop_front();
  }
  if (!updated) {
    entries_.push_front(build(kernels, params));
    if (entries_.size() > kMaxGraphs) entries_.pop_back();
  }
  check_cu(state_.api.cuGraphLaunch(entries_.front()->exec, state_.stream),
           fmt::format("{}: launching a CUDA graph of {} kernels", state_.owner.name(), kernels.size()));
  ++stats_.launches;
  state_.wait_stream(fmt::format("a CUDA graph of {} kernels", kernels.size()));
}

bool CudaGraphCache::update(Entry& entry, std::span<const KernelLaunch> kernels, std::span<CudaKernelParams> params) {
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (entry.dims[i] == *kernels[i].args.dims && entry.params[i].same_values(params[i])) continue;
    const auto& program = static_cast<const CudaProgram&>(*kernels[i].program);
    const cu::KernelNodeParams p = node_params(program, params[i], *kernels[i].args.dims);
    if (state_.api.cuGraphExecKernelNodeSetParams(entry.exec, entry.nodes[i], &p) != cu::CUDA_SUCCESS) return false;
    entry.params[i] = params[i];
    entry.dims[i] = *kernels[i].args.dims;
    ++stats_.node_updates;
  }
  return true;
}

std::unique_ptr<CudaGraphCache::Entry> CudaGraphCache::build(std::span<const KernelLaunch> kernels,
                                                             std::span<CudaKernelParams> params) {
  const auto& api = state_.api;
  const std::string name = state_.owner.name();
  auto entry = std::make_unique<Entry>(api);
  check_cu(api.cuGraphCreate(&entry->graph, 0), fmt::format("{}: cuGraphCreate", name));
  entry->nodes.resize(kernels.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const auto& program = static_cast<const CudaProgram&>(*kernels[i].program);
    const cu::KernelNodeParams p = node_params(program, params[i], *kernels[i].args.dims);
    std::vector<cu::CUgraphNode> deps;
    for (size_t a : kernels[i].after) deps.push_back(entry->nodes[a]);
    check_cu(api.cuGraphAddKernelNode(&entry->nodes[i], entry->graph, deps.empty() ? nullptr : deps.data(),
                                      deps.size(), &p),
             fmt::format("{}: adding kernel {} (\"{}\", {}) to a CUDA graph", name, i, program.spec().display_name(),
                         dims_text(*kernels[i].args.dims)));
    entry->programs.push_back(kernels[i].program);
    entry->after.emplace_back(kernels[i].after.begin(), kernels[i].after.end());
    entry->dims.push_back(*kernels[i].args.dims);
  }
  entry->params.assign(params.begin(), params.end());
  check_cu(api.cuGraphInstantiateWithFlags(&entry->exec, entry->graph, 0),
           fmt::format("{}: instantiating a CUDA graph of {} kernels", name, kernels.size()));
  ++stats_.instantiations;
  return entry;
}

}  // namespace detail

// ---- CudaDevice's graph hook -------------------------------------------------------

void CudaDevice::run_graph(std::span<const KernelLaunch> kernels) {
  if (kernels.empty()) return;
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
    program->prepare(kernels[i].args.buffers, kernels[i].args.scalars, params[i]);
    detail::driver_dims(*kernels[i].args.dims, program->spec().display_name());
  }
  state_->make_current();
  state_->graphs.run(kernels, params);
}

bool CudaDevice::submit_graph(std::span<const KernelLaunch> kernels) {
  run_graph(kernels);
  return true;
}

CudaGraphStats CudaDevice::graph_stats() const { return state_->graphs.stats(); }

}  // namespace svod
