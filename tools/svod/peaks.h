// This machine's CPU roofs for `svod bench --plot` (peaks.cpp).
#pragma once

#include <string>

namespace svod::cli {

// Peaks measured by svod's own kernels on every thread of the pool, with a
// short account of how (the picture's legend shows it).
struct MachinePeaks {
  double gflops = 0;           // f32 multiply-adds in the widest vectors the CPU has
  double cache_gbps = 0;       // streaming through data that stays in the L1 cache
  double dram_gbps = 0;        // streaming through memory (arrays several times the last-level cache)
  std::string compute_method;  // "f32 FMA, AVX2+FMA 8 lanes x 12 chains, 2 threads"
  std::string memory_method;   // the kernels and sizes behind both bandwidths
  // What the dashed roof (dram_gbps) is: "DRAM" when its arrays were several
  // times the last-level cache (or that cache's size is unknown), else
  // "L3 cache" (the last level's name): memory too short to stream past it.
  std::string memory_roof = "DRAM";
};

// The cached figures for this CPU model, thread count and way of measuring,
// or measured now (a second or a few: the DRAM arrays are sized from the
// last-level cache, SVOD_LLC_SIZE overriding what the system says) and cached in the object cache's folder
// (machine.json). Peaks cached by an older way of measuring are measured
// again. `measure_again` measures even when there are cached figures and
// keeps the better of each: a run on a busy machine only ever reads low, so
// cached peaks that an op has beaten were measured at a bad moment.
MachinePeaks machine_peaks(bool measure_again = false);

}  // namespace svod::cli
