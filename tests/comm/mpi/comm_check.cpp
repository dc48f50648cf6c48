// svod_comm_check CASE: the collective checks on the mpi backend, one rank
// per process, run under mpirun by ctest (see CMakeLists.txt here).
//   collectives  every collective, every dtype and op; exit 0 on every rank
//   mismatch     arguments that differ across ranks fail on every rank
//   failed_rank  rank 1 aborts and exits 3; every other rank prints "OK: ..."
//                naming it
//   timeout      rank 1 never calls and exits 3 after the others' timeout;
//                they time out naming it
// Each rank prints "rank R OK: ..." when its part passed.
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include "svod/comm/communicator.h"
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
  if (comm.backend() != "mpi") throw std::runtime_error("not the mpi backend");
  if (which == "collectives") {
    const int checked = test::check_all_reduce_exact(comm);
    test::check_all_reduce_bitwise(comm, 7);
    test::check_all_reduce_bitwise(comm, 100003);
    test::check_movement(comm);
    return report(comm, std::to_string(checked) + " all_reduce buffers exact, results bitwise equal, data moved");
  }
  if (which == "mismatch") {
    test::check_mismatches(comm);
    return report(comm, "every mismatch failed on this rank");
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
  std::fprintf(stderr, "usage: svod_comm_check collectives|mismatch|failed_rank|timeout\n");
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
