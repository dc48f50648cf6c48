#include "svod/tune/beam_search.h"

#include <algorithm>
#include <set>

#include "svod/base/error.h"

namespace svod {

BeamSearchResult beam_search(std::span<const size_t> value_counts, TuneEvaluator& evaluator,
                             const BeamSearchConfig& config) {
  if (config.beam_width == 0) throw make_error(ErrorKind::Validation, "beam search: the beam width must be at least 1");
  for (size_t i = 0; i < value_counts.size(); ++i) {
    if (value_counts[i] == 0) throw make_error(ErrorKind::Validation, "beam search: parameter {} has no values", i);
  }

  BeamSearchResult result;
  std::set<TunePoint> visited;
  auto run_round = [&](const std::vector<TunePoint>& points, size_t round) {
    const std::vector<std::optional<double>> costs = evaluator.evaluate(points);
    if (costs.size() != points.size()) {
      throw make_error(ErrorKind::Internal, "beam search: the evaluator returned {} costs for {} points", costs.size(),
                       points.size());
    }
    for (size_t i = 0; i < points.size(); ++i) result.evaluated.push_back({points[i], costs[i], round});
  };
  auto cheaper = [&](size_t a, size_t b) {
    // Ties go to the earlier point, so the outcome does not depend on sort internals.
    const double ca = *result.evaluated[a].cost;
    const double cb = *result.evaluated[b].cost;
    return ca != cb ? ca < cb : a < b;
  };

  const TunePoint start(value_counts.size(), 0);
  visited.insert(start);
  run_round({start}, 0);

  // A failed start leaves nothing to expand from (and the tuner nothing to
  // check candidates against): the search ends with nothing found.
  std::vector<size_t> beam;  // indices into result.evaluated, cheapest first
  if (result.evaluated[0].cost) beam.push_back(0);
  std::optional<double> best = result.evaluated[0].cost;

  for (size_t round = 1; !beam.empty() && (config.max_rounds == 0 || round <= config.max_rounds); ++round) {
    std::vector<TunePoint> fresh;
    for (size_t b : beam) {
      const TunePoint& from = result.evaluated[b].point;
      for (size_t p = 0; p < value_counts.size(); ++p) {
        for (size_t v = 0; v < value_counts[p]; ++v) {
          if (v == from[p]) continue;
          TunePoint next = from;
          next[p] = v;
          if (visited.insert(next).second) fresh.push_back(std::move(next));
        }
      }
    }
    if (fresh.empty()) break;
    const size_t first = result.evaluated.size();
    run_round(fresh, round);
    result.rounds = round;

    std::optional<double> round_best;
    for (size_t i = first; i < result.evaluated.size(); ++i) {
      const auto& cost = result.evaluated[i].cost;
      if (!cost) continue;
      beam.push_back(i);
      if (!round_best || *cost < *round_best) round_best = cost;
    }
    std::sort(beam.begin(), beam.end(), cheaper);
    if (beam.size() > config.beam_width) beam.resize(config.beam_width);

    const bool gained = round_best && *round_best < *best * (1.0 - config.min_gain);
    if (round_best && *round_best < *best) best = round_best;
    if (!gained) break;
  }

  for (size_t i = 0; i < result.evaluated.size(); ++i) {
    if (!result.evaluated[i].cost) continue;
    if (!result.found || cheaper(i, result.best)) result.best = i;
    result.found = true;
  }
  return result;
}

}  // namespace svod
