// The nccl communicator: collectives on CUDA device memory through NVIDIA's
// NCCL, without staging through host memory.
//
// It wraps a host communicator (mpi or local) with the same ranks, on which
// it relies for everything but moving device data:
//   - opening: rank 0 makes NCCL's unique id and broadcasts it over the host
//     communicator, then every rank joins with ncclCommInitRank on its CUDA
//     device;
//   - every call: the ranks compare what they asked for over the host
//     communicator first (a few bytes), so a mismatch is Error(Validation)
//     on every rank before NCCL touches data, as with the other transports;
//   - buffers in the CUDA memory of the device it was opened on go to NCCL
//     as device pointers, enqueued on that device's stream (after the svod
//     work already queued there), and the call waits for them. Every other
//     call (host buffers, another device's buffers, operands split between
//     host and device, i16/u16, which NCCL lacks) is staged and run by the
//     host communicator as usual.
// A wait longer than CommOptions::timeout aborts the NCCL communicator
// (ncclCommAbort) and is Error(Timeout); an NCCL error is Error(Execution).
// Either leaves this communicator broken, as with the other transports.
//
// NOT bit-identical with the other transports: NCCL reduces device buffers in
// its own order (rings or trees, chosen by message size, topology and NCCL
// version), not svod's rank order, and f16/bf16 are combined by NCCL in
// their own precision, so results may differ in the last bits from mpi and
// local, between runs on different machines and between NCCL versions. NaN in
// a float min or max follows NCCL. Bool sum and max are "or", prod and min
// "and" (as everywhere in svod). Host-staged calls keep svod's rules.
//
// NCCL (libnccl.so.2, shipped with the CUDA toolkit) is opened with dlopen on
// first use; svod does not link it. SVOD_NCCL_LIBRARY names the library to
// open instead.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "svod/comm/communicator.h"

namespace svod {

class Device;

// A communicator over the ranks of `host` (rank k is host's rank k) moving
// buffers of `device` (this rank's CUDA device; with several ranks, each
// rank's own GPU: NCCL refuses two ranks on one GPU) with NCCL. Collective:
// every rank of `host` calls it. Error(DeviceUnavailable) on every rank when
// NCCL cannot be loaded or any rank fails to open it (the message names the
// rank and why); Error(Validation) when `device` is not a CUDA device.
// `host` must outlive the communicator; `device` is kept. Every call uses
// `host`, so calls on `host` itself must not run at the same time from another
// thread (their order could then differ between ranks).
//
// To use it where a communicator is taken (ExecutionPlanBuilder::
// set_communicator, LoadOptions), hand over a shared_ptr to it: collectives
// of a plan on buffers of `device` then run in NCCL.
std::unique_ptr<Communicator> open_nccl_communicator(Communicator& host, std::shared_ptr<Device> device,
                                                     CommOptions options = default_comm_options());
// The same on open_device(device_name), e.g. "CUDA:1"; "CUDA:local" is this
// rank's GPU of its machine (resolve_device_name with host.local_rank()).
std::unique_ptr<Communicator> open_nccl_communicator(Communicator& host, std::string_view device_name,
                                                     CommOptions options = default_comm_options());

namespace detail {

inline constexpr size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
using NcclUniqueId = std::array<uint8_t, kNcclUniqueIdBytes>;

// NCCL's handles and the entry points svod calls, declared by hand after
// nccl.h (NCCL 2.x): results, data types and ops are ints; a stream
// (cudaStream_t, the driver's CUstream) is passed as void*.
using NcclComm = struct NcclCommHandle*;
struct NcclIdValue {
  char internal[kNcclUniqueIdBytes];
};

struct NcclApi {
  using R = int;  // ncclResult_t
  R (*ncclGetVersion)(int* version) = nullptr;
  const char* (*ncclGetErrorString)(R result) = nullptr;
  const char* (*ncclGetLastError)(NcclComm comm) = nullptr;  // may be absent (before NCCL 2.13)
  R (*ncclGetUniqueId)(NcclIdValue* id) = nullptr;
  R (*ncclCommInitRank)(NcclComm* comm, int ranks, NcclIdValue id, int rank) = nullptr;
  R (*ncclCommDestroy)(NcclComm comm) = nullptr;
  R (*ncclCommAbort)(NcclComm comm) = nullptr;
  R (*ncclCommGetAsyncError)(NcclComm comm, R* error) = nullptr;
  R (*ncclAllReduce)(const void* src, void* dst, size_t count, int dtype, int op, NcclComm comm,
                     void* stream) = nullptr;
  R (*ncclBroadcast)(const void* src, void* dst, size_t count, int dtype, int root, NcclComm comm,
                     void* stream) = nullptr;
  R (*ncclAllGather)(const void* src, void* dst, size_t src_count, int dtype, NcclComm comm,
                     void* stream) = nullptr;
  R (*ncclReduceScatter)(const void* src, void* dst, size_t dst_count, int dtype, int op, NcclComm comm,
                         void* stream) = nullptr;
  R (*ncclSend)(const void* src, size_t count, int dtype, int peer, NcclComm comm, void* stream) = nullptr;
  R (*ncclRecv)(void* dst, size_t count, int dtype, int peer, NcclComm comm, void* stream) = nullptr;

  std::string path;  // the library opened
  int version = 0;   // ncclGetVersion: 22809 for 2.28.9
};

// NCCL from SVOD_NCCL_LIBRARY, else libnccl.so.2 by the loader's search,
// else under $SVOD_CUDA_PATH/lib64 and /usr/local/cuda/lib64; loaded once per
// SVOD_NCCL_LIBRARY value. Error(DeviceUnavailable) naming what was tried and
// what failed when it is absent, lacks an entry point or is not NCCL 2.x.
const NcclApi& nccl_api();

// "2.28.9" for ncclGetVersion's number (both of its encodings).
std::string nccl_version_text(int version);

// "ncclInvalidUsage (5): invalid usage ..." for an ncclResult_t.
std::string nccl_status_text(const NcclApi& api, int status);

// The ncclDataType_t of a dtype (bool is ncclUint8); Error(Unsupported) for
// i16 and u16, which NCCL lacks.
int nccl_data_type(DType dtype);
// True when nccl_data_type(dtype) succeeds.
bool nccl_supports(DType dtype) noexcept;
// The ncclRedOp_t that computes `op` on `dtype` as svod defines it: bool sum
// is max ("or") and bool prod is min ("and"), on 0/1 bytes.
int nccl_reduce_op(DType dtype, ReduceOp op);

// The bootstrap step: rank 0 of `host` calls make_id and broadcasts the id;
// every rank returns rank 0's. Collective over `host`. When make_id throws on
// rank 0 its error is rethrown there and the others fail with
// Error(DeviceUnavailable) saying rank 0 could not make it.
NcclUniqueId exchange_nccl_unique_id(Communicator& host, const std::function<NcclUniqueId()>& make_id);

}  // namespace detail
}  // namespace svod
