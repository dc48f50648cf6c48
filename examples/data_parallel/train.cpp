// data_parallel_train: the training loop of examples/data_parallel in C++.
//
//   data_parallel_train PLAN.json [--steps K] [--ranks N]
//   mpirun -np N data_parallel_train PLAN.json [--steps K]
//
// Each rank loads the plan with its communicator (the MPI world under a
// launcher, else one of N local threads; LoadOptions::communicator), executes
// it K times (one SGD step each; default 10) and rank 0 prints the full-batch
// loss of every step, which the all_reduce delivers to every rank. Then it
// checks what data-parallel training promises:
//   - every rank's weights are bitwise identical (all-gathered and compared);
//   - they match a one-rank run of the same plan over the whole batch within
//     float tolerance (the gradient sums are split differently, so the last
//     bits may differ);
//   - when the plan's folder holds make_data.py's float64 reference for K
//     steps (stepK_w1.npy ...), they match it too.
// Exit status: 0 when every check held on every rank, 1 when one failed, 2 on
// an error (a bad plan or argument, a failed rank).
#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "svod/base/error.h"
#include "svod/base/npy.h"
#include "svod/comm/communicator.h"
#include "svod/registry/registry.h"
#include "svod/planfile/plan_file.h"

namespace {

using namespace svod;

const std::vector<std::string> kWeights = {"w1", "b1", "w2", "b2"};

struct Args {
  std::filesystem::path plan;
  int steps = 10;
  int ranks = 0;  // 0: the launcher's (or one)
};

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--steps" || arg == "--ranks") && i + 1 < argc) {
      const int value = std::atoi(argv[++i]);
      if (value < 1) throw make_error(ErrorKind::Validation, "{} must be a positive integer, got {}", arg, argv[i]);
      (arg == "--steps" ? args.steps : args.ranks) = value;
    } else if (args.plan.empty() && !arg.starts_with("--")) {
      args.plan = arg;
    } else {
      throw make_error(ErrorKind::Validation, "usage: data_parallel_train PLAN.json [--steps K] [--ranks N]");
    }
  }
  if (args.plan.empty()) throw make_error(ErrorKind::Validation, "usage: data_parallel_train PLAN.json [--steps K] [--ranks N]");
  return args;
}

std::vector<float> values(const LoadedPlan& loaded, const std::string& name) {
  const auto span = loaded.plan.buffer(*loaded.plan.find_buffer(name)).span<float>();
  return {span.begin(), span.end()};
}

// The largest |got - want| / (atol + rtol |want|): at most 1 is a match.
double worst_ratio(std::span<const float> got, std::span<const double> want, double rtol, double atol) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / (atol + rtol * std::abs(want[i])));
  return worst;
}

std::vector<double> reference(const std::filesystem::path& npy) {
  const NpyArray array = read_npy(npy);
  if (array.dtype != DType::F64) throw make_error(ErrorKind::Validation, "{}: expected float64 values", npy.string());
  std::vector<double> out(array.data.size() / sizeof(double));
  std::memcpy(out.data(), array.data.data(), array.data.size());
  return out;
}

// One rank's training and checks; false when a check failed on this rank.
bool train(const Args& args, const PlanFile& file, Communicator& comm) {
  const bool rank0 = comm.rank() == 0;
  // run_local_ranks and world_communicator own the communicator: lend it.
  LoadedPlan loaded = load_plan(file, LoadOptions{.communicator = borrowed(comm)});
  for (int step = 1; step <= args.steps; ++step) {
    loaded.execute();
    if (rank0) fmt::print("step {:3d}: loss {:.6f}\n", step, values(loaded, "loss")[0]);
  }

  bool ok = true;
  auto check = [&](bool passed, const std::string& what) {
    if (!passed) fmt::print(stderr, "rank {}: FAILED: {}\n", comm.rank(), what);
    ok = ok && passed;
  };
  // Bitwise identical on every rank: each rank gathers every rank's copy.
  const auto cpu = open_device("CPU");
  for (const auto& name : kWeights) {
    const Buffer& mine = loaded.plan.buffer(*loaded.plan.find_buffer(name));
    Buffer all = cpu->allocate(mine.dtype(), mine.count() * comm.size());
    comm.all_gather(mine, all);
    for (int r = 0; r < comm.size(); ++r)
      check(std::memcmp(all.span<std::byte>().data() + r * mine.bytes(), mine.data(), mine.bytes()) == 0,
            fmt::format("{} of rank {} differs from this rank's", name, r));
  }
  if (!rank0) return ok;

  // The one-rank run over the whole batch, and make_data.py's reference.
  LoadedPlan alone = load_plan(file);
  for (int step = 0; step < args.steps; ++step) alone.execute();
  double worst_alone = 0, worst_reference = 0;
  bool have_reference = true;
  for (const auto& name : kWeights) {
    const std::vector<float> got = values(loaded, name), want = values(alone, name);
    const std::vector<double> want64(want.begin(), want.end());
    worst_alone = std::max(worst_alone, worst_ratio(got, want64, 1e-4, 1e-6));
    const auto npy = file.folder / fmt::format("step{}_{}.npy", args.steps, name);
    have_reference = have_reference && std::filesystem::exists(npy);
    if (have_reference) worst_reference = std::max(worst_reference, worst_ratio(got, reference(npy), 1e-4, 1e-5));
  }
  check(worst_alone <= 1, fmt::format("the weights differ from the one-rank run's (error {:.3g} x tolerance)", worst_alone));
  if (have_reference)
    check(worst_reference <= 1,
          fmt::format("the weights differ from make_data.py's reference (error {:.3g} x tolerance)", worst_reference));
  if (ok)
    fmt::print("{} ranks ({}): weights bitwise identical on every rank; within {:.2g} x tolerance of one rank{}\n",
               comm.size(), comm.transport(), worst_alone,
               have_reference ? fmt::format(" and {:.2g} x of the float64 reference", worst_reference)
                              : std::string(" (no reference for this many steps)"));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse_args(argc, argv);
    if (args.ranks == 0) {
      Communicator& world = world_communicator();
      try {
        return train(args, parse_plan_file(args.plan), world) ? 0 : 1;
      } catch (const Error& e) {
        world.abort(e.what());  // the other processes fail naming this rank instead of waiting
        throw;
      }
    }
    if (launched_by_mpi())
      throw make_error(ErrorKind::Validation, "--ranks runs local ranks; under mpirun each process is one rank");
    const PlanFile file = parse_plan_file(args.plan);
    std::atomic<bool> ok = true;
    run_local_ranks(args.ranks, [&](Communicator& comm) {
      if (!train(args, file, comm)) ok = false;
    });
    return ok ? 0 : 1;
  } catch (const Error& e) {
    fmt::print(stderr, "data_parallel_train: error ({}): {}\n", to_string(e.kind()), e.what());
    return 2;
  }
}
