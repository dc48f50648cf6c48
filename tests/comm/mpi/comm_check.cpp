// svod_comm_check CASE: the collective checks on the mpi transport, one rank
// per process, run under mpirun by ctest (see CMakeLists.txt here).
//   collectives  every collective, every dtype and op; exit 0 on every rank
//   mismatch     arguments that differ across ranks fail on every rank
//   failed_rank  rank 1 aborts and exits 3; every other rank prints "OK: ..."
//                naming it
//   timeout      rank 1 never calls and exits 3 after the others' timeout;
//                they time out naming it
//   local_rank   all ranks on this machine: local_rank is the rank and
//                local_size the size, and a plan on "CL:local" (or
//                "CPU:local" without OpenCL) loads and runs on every rank,
//                each on device local_rank % count
// Each rank prints "rank R OK: ..." when its part passed.
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "svod/comm/communicator.h"
#include "svod/planfile/plan_file.h"
#include "svod/registry/registry.h"
#include "tests/support/comm_checks.h"

namespace {

using namespace svod;

int report(Communicator& comm, const std::string& what) {
  std::printf("rank %d OK: %s\n", comm.rank(), what.c_str());
  std::fflush(stdout);
  return 0;
}

// Lets the other ranks report before this one's exit could tear the job
// down (a rank that had to abandon requests aborts the job at exit).
void linger() { std::this_thread::sleep_for(std::chrono::seconds(1)); }

int run(const std::string& which) {
  Communicator& comm = world_communicator("mpi");
  if (comm.transport() != "mpi") throw std::runtime_error("not the mpi transport");
  if (which == "collectives") {
    const int checked = test::check_all_reduce_exact(comm);
    test::check_all_reduce_bitwise(comm, 7);
    test::check_all_reduce_bitwise(comm, 100003);
    test::check_movement(comm);
    // Calls split into parts, on host memory, then with the odd ranks'
    // buffers staged from OpenCL memory where there is a device (PoCL here).
    test::check_split_calls(comm, nullptr);
    std::shared_ptr<Device> cl;
    try {
      cl = open_device("CL:0");
    } catch (const Error&) {  // no OpenCL here: host memory only
    }
    test::check_split_calls(comm, comm.rank() % 2 == 1 ? cl.get() : nullptr);
    return report(comm, std::to_string(checked) + " all_reduce buffers exact, results bitwise equal, data moved" +
                            (cl ? ", split calls staged from " + cl->name() : ""));
  }
  if (which == "mismatch") {
    test::check_mismatches(comm);
    return report(comm, "every mismatch failed on this rank");
  }
  if (which == "local_rank") {
    // ctest starts every rank on this machine.
    if (comm.local_rank() != comm.rank() || comm.local_size() != comm.size())
      throw std::runtime_error("local rank " + std::to_string(comm.local_rank()) + " of " +
                               std::to_string(comm.local_size()) + ", expected " + std::to_string(comm.rank()) +
                               " of " + std::to_string(comm.size()));
    std::string kind = "CL";
    size_t count = 0;
    for (const auto& d : device_registry().list_devices()) count += d.available && d.name.rfind("CL:", 0) == 0;
    if (count == 0) kind = "CPU";
    const std::string program =
        kind == "CL" ? R"J({ "language": "opencl", "entry": "set",
             "source": "__kernel void set(__global float* g, int v) { g[get_global_id(0)] = v; }",
             "buffers": [ { "name": "g", "access": "write" } ], "scalars": [ { "name": "v", "type": "i32" } ],
             "global_size": [1], "local_size": [16] })J"
                     : R"J({ "language": "c", "entry": "set",
             "source": "void set(float* g, int v) { for (int i = 0; i < 16; i++) g[i] = v; }",
             "buffers": [ { "name": "g", "access": "write" } ], "scalars": [ { "name": "v", "type": "i32" } ] })J";
    const std::string plan = R"J({ "svod_plan": 1, "device": ")J" + kind + R"J(:local",
      "buffers": { "d": { "dtype": "f32", "count": 16 }, "h": { "dtype": "f32", "count": 16, "device": "CPU" } },
      "programs": { "set": )J" + program + R"J( },
      "ops": [ { "run": "set", "buffers": ["d"], "scalars": { "v": "rank + 1" } },
               { "collective": { "kind": "all_reduce", "buffers": ["d"], "op": "sum" } },
               { "copy": { "dst": "h", "src": "d" } } ] })J";
    LoadedPlan loaded = load_plan(parse_plan_text(plan, ".", "local.json"), LoadOptions{.communicator = borrowed(comm)});
    const std::string device = loaded.plan.buffer(*loaded.plan.find_buffer("d")).device().name();
    const std::string expected = kind == "CL" ? "CL:" + std::to_string(static_cast<size_t>(comm.local_rank()) % count) : "CPU";
    if (device != expected) throw std::runtime_error(kind + ":local resolved to " + device + ", expected " + expected);
    loaded.execute();
    const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
    for (float v : loaded.plan.buffer(*loaded.plan.find_buffer("h")).span<float>())
      if (v != want) throw std::runtime_error("the plan computed " + std::to_string(v) + ", expected " + std::to_string(want));
    return report(comm, "local rank " + std::to_string(comm.local_rank()) + " of " + std::to_string(comm.local_size()) +
                            ", " + kind + ":local is " + device);
  }
  Buffer buffer = open_device("CPU")->allocate(DType::F32, 100000);
  if (which == "failed_rank") {
    if (comm.rank() == 1) {
      comm.abort("injected failure");
      return 3;
    }
    test::expect_comm_error([&] { comm.all_reduce(buffer, ReduceOp::Sum); }, ErrorKind::Execution,
                            "because rank 1 failed: injected failure");
    report(comm, "saw rank 1 fail");
    linger();
    return 0;
  }
  if (which == "timeout") {
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(default_comm_options().timeout + std::chrono::seconds(3));
      return 3;
    }
    test::expect_comm_error([&] { comm.all_reduce(buffer, ReduceOp::Sum); }, ErrorKind::Timeout, "rank(s) 1 to arrive");
    report(comm, "timed out waiting for rank 1");
    linger();
    return 0;
  }
  std::fprintf(stderr, "usage: svod_comm_check collectives|mismatch|failed_rank|timeout|local_rank\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return run("");
  try {
    return run(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "svod_comm_check %s: %s\n", argv[1], e.what());
    return 1;
  }
}
