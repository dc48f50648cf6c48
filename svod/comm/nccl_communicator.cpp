#include "svod/comm/nccl_communicator.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "svod/base/env.h"
#include "svod/base/error.h"
#include "svod/base/plugin.h"
#include "svod/device/host_device.h"
#include "svod/device/native_stream.h"
#include "svod/registry/registry.h"

namespace svod {
namespace detail {

namespace {

// ncclResult_t values svod tests for.
constexpr int kNcclSuccess = 0;
constexpr int kNcclInProgress = 7;

// ncclDataType_t.
constexpr int kNcclInt8 = 0, kNcclUint8 = 1, kNcclInt32 = 2, kNcclUint32 = 3, kNcclInt64 = 4, kNcclUint64 = 5,
              kNcclFloat16 = 6, kNcclFloat32 = 7, kNcclFloat64 = 8, kNcclBfloat16 = 9;
// ncclRedOp_t.
constexpr int kNcclSum = 0, kNcclProd = 1, kNcclMax = 2, kNcclMin = 3;

// The oldest NCCL with every entry point svod calls (ncclSend/ncclRecv).
constexpr int kMinMajor = 2, kMinMinor = 7;

struct VersionParts {
  int major, minor, patch;
};

// NCCL_VERSION: X*1000 + Y*100 + Z up to 2.8, X*10000 + Y*100 + Z after.
VersionParts version_parts(int version) {
  if (version < 10000) return {version / 1000, version % 1000 / 100, version % 100};
  return {version / 10000, version % 10000 / 100, version % 100};
}

struct LoadedNccl {
  NcclApi api;
  std::optional<Error> failure;  // why NCCL is unusable, reported on every use
};

LoadedNccl load_nccl(const std::optional<std::string>& configured) {
  LoadedNccl out;
  std::vector<std::string> candidates;
  if (configured) {
    candidates = {*configured};
  } else {
    candidates = {"libnccl.so.2"};
    if (auto cuda = env_string(EnvVar::CudaPath)) candidates.push_back(*cuda + "/lib64/libnccl.so.2");
    candidates.push_back("/usr/local/cuda/lib64/libnccl.so.2");
  }
  // Never closed: communicators may live until exit.
  std::string tried;
  void* handle = detail::open_first_library(candidates, out.api.path, tried);
  if (!handle) {
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable,
                                   "no NCCL: cannot open it (tried {}); install NCCL (the CUDA toolkit ships "
                                   "libnccl.so.2) or point SVOD_NCCL_LIBRARY at libnccl.so.2",
                                   tried));
    return out;
  }
  NcclApi& api = out.api;
  detail::SymbolBinder bind(handle);
  bind(api.ncclGetVersion, "ncclGetVersion");
  bind(api.ncclGetErrorString, "ncclGetErrorString");
  bind(api.ncclGetLastError, "ncclGetLastError", false);
  bind(api.ncclGetUniqueId, "ncclGetUniqueId");
  bind(api.ncclCommInitRank, "ncclCommInitRank");
  bind(api.ncclCommDestroy, "ncclCommDestroy");
  bind(api.ncclCommAbort, "ncclCommAbort");
  bind(api.ncclCommGetAsyncError, "ncclCommGetAsyncError");
  bind(api.ncclAllReduce, "ncclAllReduce");
  bind(api.ncclBroadcast, "ncclBroadcast");
  bind(api.ncclAllGather, "ncclAllGather");
  bind(api.ncclReduceScatter, "ncclReduceScatter");
  bind(api.ncclSend, "ncclSend");
  bind(api.ncclRecv, "ncclRecv");
  if (bind.missing()) {
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable, "NCCL at {} has no {} (svod needs NCCL {}.{} or newer)",
                                   api.path, bind.missing(), kMinMajor, kMinMinor));
    return out;
  }
  const int status = api.ncclGetVersion(&api.version);
  if (status != kNcclSuccess) {
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable, "NCCL at {}: ncclGetVersion: {}", api.path,
                                   nccl_status_text(api, status)));
    return out;
  }
  const VersionParts v = version_parts(api.version);
  if (v.major < kMinMajor || (v.major == kMinMajor && v.minor < kMinMinor))
    out.failure.emplace(make_error(ErrorKind::DeviceUnavailable, "NCCL at {} is version {}; svod needs {}.{} or newer",
                                   api.path, nccl_version_text(api.version), kMinMajor, kMinMinor));
  return out;
}

}  // namespace

const NcclApi& nccl_api() {
  static std::mutex mutex;
  static std::map<std::string, LoadedNccl> loaded;  // by SVOD_NCCL_LIBRARY ("" when unset)
  const std::optional<std::string> configured = env_string(EnvVar::NcclLibrary);
  std::lock_guard lock(mutex);
  auto it = loaded.find(configured.value_or(""));
  if (it == loaded.end()) it = loaded.emplace(configured.value_or(""), load_nccl(configured)).first;
  if (it->second.failure) throw *it->second.failure;
  return it->second.api;
}

std::string nccl_version_text(int version) {
  const VersionParts v = version_parts(version);
  return fmt::format("{}.{}.{}", v.major, v.minor, v.patch);
}

std::string nccl_status_text(const NcclApi& api, int status) {
  static constexpr const char* kNames[] = {"ncclSuccess",      "ncclUnhandledCudaError", "ncclSystemError",
                                           "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                           "ncclRemoteError",  "ncclInProgress"};
  const char* name = status >= 0 && status < static_cast<int>(std::size(kNames)) ? kNames[status] : "ncclResult";
  const char* text = api.ncclGetErrorString ? api.ncclGetErrorString(status) : nullptr;
  return text ? fmt::format("{} ({}): {}", name, status, text) : fmt::format("{} ({})", name, status);
}

int nccl_data_type(DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::U8: return kNcclUint8;
    case DType::I8: return kNcclInt8;
    case DType::I32: return kNcclInt32;
    case DType::U32: return kNcclUint32;
    case DType::I64: return kNcclInt64;
    case DType::U64: return kNcclUint64;
    case DType::F16: return kNcclFloat16;
    case DType::BF16: return kNcclBfloat16;
    case DType::F32: return kNcclFloat32;
    case DType::F64: return kNcclFloat64;
    case DType::I16:
    case DType::U16: break;
  }
  throw make_error(ErrorKind::Unsupported, "NCCL has no {} data type", to_string(dtype));
}

bool nccl_supports(DType dtype) noexcept { return dtype != DType::I16 && dtype != DType::U16; }

int nccl_reduce_op(DType dtype, ReduceOp op) {
  nccl_data_type(dtype);  // throws for what NCCL lacks
  switch (op) {
    case ReduceOp::Sum: return dtype == DType::Bool ? kNcclMax : kNcclSum;
    case ReduceOp::Prod: return dtype == DType::Bool ? kNcclMin : kNcclProd;
    case ReduceOp::Min: return kNcclMin;
    case ReduceOp::Max: return kNcclMax;
  }
  throw make_error(ErrorKind::Validation, "unknown reduce op {}", static_cast<int>(op));
}

NcclUniqueId exchange_nccl_unique_id(Communicator& host, const std::function<NcclUniqueId()>& make_id) {
  // One message: a byte saying whether rank 0 has an id, then the id.
  Buffer message = host_device().allocate(DType::U8, 1 + kNcclUniqueIdBytes);
  std::span<uint8_t> bytes = message.span<uint8_t>();
  std::exception_ptr failure;
  if (host.rank() == 0) {
    try {
      const NcclUniqueId id = make_id();
      bytes[0] = 1;
      std::memcpy(bytes.data() + 1, id.data(), id.size());
    } catch (...) {
      failure = std::current_exception();
    }
  }
  host.broadcast(message, 0);
  if (failure) std::rethrow_exception(failure);
  if (bytes[0] != 1)
    throw make_error(ErrorKind::DeviceUnavailable,
                     "nccl communicator (rank {} of {}): rank 0 could not make the NCCL unique id (see its error)",
                     host.rank(), host.size());
  NcclUniqueId id;
  std::memcpy(id.data(), bytes.data() + 1, id.size());
  return id;
}

}  // namespace detail

namespace {

using detail::CallDesc;
using detail::NcclApi;
using detail::NcclComm;

// Host memory svod does not own (a host operand the base class hands to
// run_*), as a Buffer for the host communicator's calls.
class BorrowedHostStorage final : public Storage {
 public:
  BorrowedHostStorage(void* data, size_t bytes) : Storage(host_device(), bytes, data) {}
};

Buffer borrow(const void* data, DType dtype, size_t count) {
  static std::byte empty[8];  // a zero-byte operand may have no address
  void* address = data ? const_cast<void*>(data) : empty;
  return Buffer(std::make_shared<BorrowedHostStorage>(address, count * size_of(dtype)), dtype);
}

Buffer desc_bytes(const CallDesc& desc) {
  Buffer buffer = host_device().allocate(DType::U8, sizeof(CallDesc));
  std::memcpy(buffer.data(), &desc, sizeof(CallDesc));
  return buffer;
}

CallDesc desc_at(const Buffer& bytes, size_t index) {
  CallDesc desc;
  std::memcpy(static_cast<void*>(&desc), static_cast<const std::byte*>(bytes.data()) + index * sizeof(CallDesc),
              sizeof(CallDesc));
  return desc;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& host, std::shared_ptr<Device> device, NativeStream& stream, const NcclApi& api,
                   NcclComm comm, CommOptions options)
      : Communicator(host.rank(), host.size(), options),
        host_(host),
        device_(std::move(device)),
        stream_(stream),
        api_(api),
        comm_(comm) {}

  ~NcclCommunicator() override {
    stream_.enter_stream();  // NCCL's calls on the device's context
    if (comm_) (failed_ ? api_.ncclCommAbort : api_.ncclCommDestroy)(comm_);
  }

  std::string_view transport() const noexcept override { return "nccl"; }
  int local_rank() const noexcept override { return host_.local_rank(); }
  int local_size() const noexcept override { return host_.local_size(); }
  void mark_failed() noexcept { failed_ = true; }

 protected:
  void* native_address(const Buffer& buffer) const noexcept override {
    return detail::nccl_supports(buffer.dtype()) ? stream_.device_address(buffer) : nullptr;
  }

  void run_barrier(const CallDesc& desc) override { agree(desc); }

  void run_all_reduce(const CallDesc& desc, void* data) override {
    agree(desc);
    if (!desc.native) return host_.all_reduce(borrow(data, desc.dtype, desc.count), desc.op);
    enqueue("all_reduce", api_.ncclAllReduce(data, data, desc.count, detail::nccl_data_type(desc.dtype),
                                             detail::nccl_reduce_op(desc.dtype, desc.op), comm_, stream()));
  }

  void run_all_gather(const CallDesc& desc, const void* src, void* dst) override {
    agree(desc);
    if (!desc.native)
      return host_.all_gather(borrow(src, desc.dtype, desc.count), borrow(dst, desc.dtype, desc.count * size()));
    enqueue("all_gather",
            api_.ncclAllGather(src, dst, desc.count, detail::nccl_data_type(desc.dtype), comm_, stream()));
  }

  void run_reduce_scatter(const CallDesc& desc, const void* src, void* dst) override {
    agree(desc);
    if (!desc.native)
      return host_.reduce_scatter(borrow(src, desc.dtype, desc.count * size()), borrow(dst, desc.dtype, desc.count),
                                  desc.op);
    enqueue("reduce_scatter", api_.ncclReduceScatter(src, dst, desc.count, detail::nccl_data_type(desc.dtype),
                                                     detail::nccl_reduce_op(desc.dtype, desc.op), comm_, stream()));
  }

  void run_broadcast(const CallDesc& desc, void* data) override {
    agree(desc);
    if (!desc.native) return host_.broadcast(borrow(data, desc.dtype, desc.count), desc.peer);
    enqueue("broadcast", api_.ncclBroadcast(data, data, desc.count, detail::nccl_data_type(desc.dtype), desc.peer,
                                            comm_, stream()));
  }

  void run_send(const CallDesc& desc, const void* data, int dest) override {
    handshake(desc, dest, true);
    if (!desc.native) return host_.send(borrow(data, desc.dtype, desc.count), dest, desc.peer);
    enqueue("send", api_.ncclSend(data, desc.count, detail::nccl_data_type(desc.dtype), dest, comm_, stream()));
  }

  void run_recv(const CallDesc& desc, void* data, int source) override {
    handshake(desc, source, false);
    if (!desc.native) return host_.recv(borrow(data, desc.dtype, desc.count), source, desc.peer);
    enqueue("recv", api_.ncclRecv(data, desc.count, detail::nccl_data_type(desc.dtype), source, comm_, stream()));
  }

  void run_abort(const std::string& reason) override {
    // The other ranks wait in the host communicator (or in NCCL, until their
    // timeout): failing it is what tells them.
    host_.abort(reason);
    if (comm_) {
      stream_.enter_stream();
      api_.ncclCommAbort(comm_);
      comm_ = nullptr;
    }
  }

 private:
  void* stream() { return stream_.enter_stream(); }

  std::string where() const { return fmt::format("on {} (rank {} of {})", device_->name(), rank(), size()); }

  std::string status_text(int status) const {
    std::string text = detail::nccl_status_text(api_, status);
    const char* last = api_.ncclGetLastError && comm_ ? api_.ncclGetLastError(comm_) : nullptr;
    if (last && *last) text += fmt::format(" ({})", last);
    return text;
  }

  // Every rank's descriptor, over the host communicator; Error(Validation)
  // on every rank when they differ or one rank rejected its arguments.
  void agree(const CallDesc& desc) {
    Buffer all = host_device().allocate(DType::U8, sizeof(CallDesc) * size());
    host_.all_gather(desc_bytes(desc), all);
    std::vector<CallDesc> descs;
    descs.reserve(size());
    for (int k = 0; k < size(); ++k) descs.push_back(desc_at(all, k));
    if (auto mismatch = detail::find_mismatch(descs)) throw Error(ErrorKind::Validation, *mismatch);
  }

  // The sender's and the receiver's descriptors, exchanged over the host
  // communicator before anything moves: a mismatch is Error(Validation) on
  // both instead of a hang in NCCL.
  void handshake(const CallDesc& desc, int peer, bool sending) {
    Buffer theirs = host_device().allocate(DType::U8, sizeof(CallDesc));
    if (sending) {
      host_.send(desc_bytes(desc), peer, desc.peer);
      host_.recv(theirs, peer, desc.peer);
    } else {
      host_.recv(theirs, peer, desc.peer);
      host_.send(desc_bytes(desc), peer, desc.peer);
    }
    const CallDesc other = desc_at(theirs, 0);
    if (other == desc) return;
    const int sender = sending ? rank() : peer, receiver = sending ? peer : rank();
    const CallDesc& sent = sending ? desc : other;
    const CallDesc& expected = sending ? other : desc;
    throw make_error(ErrorKind::Validation, "rank {} sent {} but rank {} expects {}", sender, detail::describe(sent),
                     receiver, detail::describe(expected));
  }

  // Checks the status of an NCCL call just made on the stream and waits for
  // it, polling for NCCL's asynchronous errors; past the timeout the NCCL
  // communicator is aborted (NCCL's way out of a hung collective).
  void enqueue(std::string_view what, int status) {
    if (status != detail::kNcclSuccess) {
      failed_ = true;
      throw make_error(ErrorKind::Execution, "nccl {} {}: {}", what, where(), status_text(status));
    }
    const auto deadline = std::chrono::steady_clock::now() + options().timeout;
    int polls = 0;
    try {
      stream_.wait_stream(fmt::format("nccl {} {}", what, where()), [&] {
        int async = detail::kNcclSuccess;
        if (api_.ncclCommGetAsyncError(comm_, &async) == detail::kNcclSuccess && async != detail::kNcclSuccess &&
            async != detail::kNcclInProgress)
          throw make_error(ErrorKind::Execution, "nccl {} {}: {}", what, where(), status_text(async));
        if (std::chrono::steady_clock::now() > deadline) {
          api_.ncclCommAbort(comm_);
          comm_ = nullptr;
          throw make_error(ErrorKind::Timeout,
                           "nccl {} {}: not finished after {} ms (a rank is missing or stuck); the NCCL "
                           "communicator was aborted",
                           what, where(), options().timeout.count());
        }
        // Short collectives finish within a few polls; longer ones are not
        // worth a spinning core.
        if (++polls < 1000)
          std::this_thread::yield();
        else
          std::this_thread::sleep_for(std::chrono::microseconds(50));
      });
    } catch (...) {
      failed_ = true;
      throw;
    }
  }

  Communicator& host_;
  std::shared_ptr<Device> device_;
  NativeStream& stream_;  // device_'s
  const NcclApi& api_;
  NcclComm comm_;
  bool failed_ = false;  // abort rather than destroy the NCCL communicator
};

// Every rank says whether its step of the opening succeeded; a rank that
// failed rethrows its error, the others throw naming it, so that no rank
// goes on to wait in NCCL for one that never comes.
void agree_step(Communicator& host, const std::exception_ptr& failure, std::string_view step) {
  Buffer mine = host_device().allocate(DType::U8, 1);
  mine.span<uint8_t>()[0] = failure ? 0 : 1;
  Buffer all = host_device().allocate(DType::U8, static_cast<size_t>(host.size()));
  host.all_gather(mine, all);
  if (failure) std::rethrow_exception(failure);
  std::vector<int> failed;
  for (int k = 0; k < host.size(); ++k)
    if (all.span<uint8_t>()[k] == 0) failed.push_back(k);
  if (!failed.empty())
    throw make_error(ErrorKind::DeviceUnavailable, "nccl communicator (rank {} of {}): rank(s) {} could not {} (see "
                     "the error there)", host.rank(), host.size(), detail::rank_list(failed), step);
}

// Runs `step`, turning what it throws into an exception_ptr whose message
// names this rank.
template <typename Step>
std::exception_ptr attempt(Communicator& host, Step&& step) {
  try {
    step();
    return nullptr;
  } catch (const Error& error) {
    return std::make_exception_ptr(make_error(error.kind(), "nccl communicator (rank {} of {}): {}", host.rank(),
                                              host.size(), error.what()));
  } catch (const std::exception& error) {
    return std::make_exception_ptr(make_error(ErrorKind::DeviceUnavailable, "nccl communicator (rank {} of {}): {}",
                                              host.rank(), host.size(), error.what()));
  }
}

std::unique_ptr<Communicator> open_nccl(Communicator& host, const std::function<std::shared_ptr<Device>()>& get_device,
                                        CommOptions options) {
  const NcclApi* api = nullptr;
  std::shared_ptr<Device> cuda;
  NativeStream* stream = nullptr;
  agree_step(host, attempt(host, [&] {
               api = &detail::nccl_api();
               std::shared_ptr<Device> device = get_device();
               if (!device) throw Error(ErrorKind::Validation, "no device given");
               // NCCL moves CUDA memory: a CUDA device's stream.
               if (device->name().starts_with("CUDA:")) stream = dynamic_cast<NativeStream*>(device.get());
               cuda = device;
               if (!stream)
                 throw make_error(ErrorKind::Validation, "{} is not a CUDA device; NCCL moves CUDA memory",
                                  device->name());
             }),
             "load NCCL or open their CUDA device");

  const detail::NcclUniqueId id = detail::exchange_nccl_unique_id(host, [&] {
    detail::NcclIdValue value{};
    const int status = api->ncclGetUniqueId(&value);
    if (status != detail::kNcclSuccess)
      throw make_error(ErrorKind::DeviceUnavailable, "nccl communicator (rank 0 of {}): ncclGetUniqueId: {}",
                       host.size(), detail::nccl_status_text(*api, status));
    detail::NcclUniqueId out;
    std::memcpy(out.data(), value.internal, out.size());
    return out;
  });

  std::unique_ptr<NcclCommunicator> comm;
  const std::exception_ptr failure = attempt(host, [&] {
    detail::NcclIdValue value;
    std::memcpy(value.internal, id.data(), id.size());
    // NCCL takes the device whose context is current.
    stream->enter_stream();
    NcclComm handle = nullptr;
    const int status = api->ncclCommInitRank(&handle, host.size(), value, host.rank());
    if (status != detail::kNcclSuccess)
      throw make_error(ErrorKind::DeviceUnavailable, "ncclCommInitRank on {}: {}", cuda->name(),
                       detail::nccl_status_text(*api, status));
    try {
      comm = std::make_unique<NcclCommunicator>(host, cuda, *stream, *api, handle, options);
    } catch (...) {
      api->ncclCommAbort(handle);
      throw;
    }
  });
  try {
    agree_step(host, failure, "join the NCCL communicator");
  } catch (...) {
    if (comm) comm->mark_failed();
    throw;
  }
  return comm;
}

}  // namespace

std::unique_ptr<Communicator> open_nccl_communicator(Communicator& host, std::shared_ptr<Device> device,
                                                     CommOptions options) {
  return open_nccl(host, [&] { return device; }, options);
}

std::unique_ptr<Communicator> open_nccl_communicator(Communicator& host, std::string_view device_name,
                                                     CommOptions options) {
  return open_nccl(host, [&] { return open_device(resolve_device_name(device_name, host.local_rank())); }, options);
}

}  // namespace svod
