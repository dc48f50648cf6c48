// Beam search over a grid of tuning parameters, independent of what a
// candidate is and how it is measured, so the search itself can be tested
// on a synthetic cost landscape.
//
// A point picks one value index per parameter. The search starts at the
// point of first values and evaluates it alone. Each round then takes every
// point of the beam, changes one parameter at a time to each of its other
// values, drops points already visited, and evaluates the new points as one
// batch (so an evaluator can compile them together). The beam becomes the
// `beam_width` cheapest points seen so far. The search stops when a round's
// best point is not cheaper than the best before it by more than `min_gain`
// (relative), when no new points remain, or after `max_rounds` rounds.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace svod {

using TunePoint = std::vector<size_t>;  // one value index per parameter

class TuneEvaluator {
 public:
  virtual ~TuneEvaluator() = default;
  // The cost of each point (lower is better), or nullopt for a point that
  // failed. Called once per round with the round's new points.
  virtual std::vector<std::optional<double>> evaluate(std::span<const TunePoint> points) = 0;
};

struct BeamSearchConfig {
  size_t beam_width = 4;
  double min_gain = 0.0;   // a round must beat the best by more than this fraction
  size_t max_rounds = 0;   // rounds after the start; 0: no limit
};

struct BeamSearchStep {
  TunePoint point;
  std::optional<double> cost;
  size_t round = 0;  // 0 for the start point
};

struct BeamSearchResult {
  std::vector<BeamSearchStep> evaluated;  // in evaluation order; [0] is the start
  size_t best = 0;                        // index into evaluated; meaningful when found
  bool found = false;                     // some point succeeded
  size_t rounds = 0;                      // rounds after the start
};

// `value_counts[i]` is the number of values of parameter i (each at least 1).
// The evaluator's exceptions propagate.
BeamSearchResult beam_search(std::span<const size_t> value_counts, TuneEvaluator& evaluator,
                             const BeamSearchConfig& config = {});

}  // namespace svod
