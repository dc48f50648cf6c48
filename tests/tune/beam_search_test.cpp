// beam_search on synthetic cost landscapes whose optimum is known.
#include "svod/tune/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "tests/support/test_support.h"

namespace svod {
namespace {

// Costs from a function of the point; records every point and batch it sees.
class Landscape final : public TuneEvaluator {
 public:
  explicit Landscape(std::function<std::optional<double>(const TunePoint&)> cost) : cost_(std::move(cost)) {}
  std::vector<std::optional<double>> evaluate(std::span<const TunePoint> points) override {
    batches.push_back(points.size());
    std::vector<std::optional<double>> out;
    for (const auto& p : points) {
      EXPECT_TRUE(seen.insert(p).second) << "a point was evaluated twice";
      out.push_back(cost_(p));
    }
    return out;
  }
  std::set<TunePoint> seen;
  std::vector<size_t> batches;

 private:
  std::function<std::optional<double>(const TunePoint&)> cost_;
};

const TunePoint& best_point(const BeamSearchResult& r) { return r.evaluated.at(r.best).point; }

TEST(BeamSearch, FindsTheOptimumOfASeparableLandscape) {
  const TunePoint optimum = {3, 1, 4};
  Landscape land([&](const TunePoint& p) {
    double cost = 1;
    for (size_t i = 0; i < p.size(); ++i) cost += double(p[i] - optimum[i]) * double(p[i] - optimum[i]);
    return std::optional(cost);
  });
  const size_t counts[] = {5, 5, 5};
  const BeamSearchResult r = beam_search(counts, land, {.beam_width = 4});
  ASSERT_TRUE(r.found);
  EXPECT_EQ(best_point(r), optimum);
  EXPECT_EQ(r.evaluated.front().point, (TunePoint{0, 0, 0}));
  EXPECT_EQ(land.batches.front(), 1u) << "the start is evaluated alone";
  EXPECT_LT(land.seen.size(), 125u) << "the search should not need the whole grid";
}

TEST(BeamSearch, StopsWhenARoundBringsNoGain) {
  // The start is the optimum: one round of neighbours, then stop.
  Landscape land([](const TunePoint& p) { return std::optional(1.0 + double(p[0] + p[1])); });
  const size_t counts[] = {4, 3};
  const BeamSearchResult r = beam_search(counts, land, {.beam_width = 4});
  EXPECT_EQ(r.rounds, 1u);
  EXPECT_EQ(r.evaluated.size(), 1u + 3u + 2u);
  EXPECT_EQ(best_point(r), (TunePoint{0, 0}));
}

// Two rounds to the optimum (1,1): the first gains 1%, the second 50%.
std::optional<double> two_steps(const TunePoint& p) {
  static const std::map<TunePoint, double> cost = {{{0, 0}, 100}, {{1, 0}, 99}, {{0, 1}, 99.5}, {{1, 1}, 50}};
  return cost.at(p);
}

TEST(BeamSearch, MinGainEndsTheSearchOnSmallImprovements) {
  const size_t counts[] = {2, 2};
  Landscape strict(two_steps);
  const BeamSearchResult stopped = beam_search(counts, strict, {.beam_width = 1, .min_gain = 0.05});
  EXPECT_EQ(stopped.rounds, 1u);
  EXPECT_EQ(best_point(stopped), (TunePoint{1, 0}));

  Landscape any(two_steps);
  EXPECT_EQ(best_point(beam_search(counts, any, {.beam_width = 1})), (TunePoint{1, 1}));
}

// (0,0) costs 10; (1,0) is the best neighbour (5) but a dead end; (0,3) is
// second (6) and leads to the optimum (2,3), two changes from the start.
std::optional<double> trap(const TunePoint& p) {
  static const std::map<TunePoint, double> known = {{{0, 0}, 10}, {{1, 0}, 5}, {{0, 3}, 6}, {{2, 3}, 1}};
  auto it = known.find(p);
  return it == known.end() ? 20.0 : it->second;
}

TEST(BeamSearch, AWiderBeamEscapesALocalOptimum) {
  const size_t counts[] = {4, 4};
  Landscape narrow(trap);
  const BeamSearchResult one = beam_search(counts, narrow, {.beam_width = 1});
  EXPECT_EQ(best_point(one), (TunePoint{1, 0}));
  EXPECT_EQ(one.rounds, 2u);

  Landscape wide(trap);
  const BeamSearchResult two = beam_search(counts, wide, {.beam_width = 2});
  EXPECT_EQ(best_point(two), (TunePoint{2, 3}));
}

TEST(BeamSearch, FailedPointsAreSkipped) {
  // Every point with p[1] == 1 fails, the optimum is (2, 2).
  Landscape land([](const TunePoint& p) -> std::optional<double> {
    if (p[1] == 1) return std::nullopt;
    return 1.0 + double((2 - int(p[0])) * (2 - int(p[0])) + (2 - int(p[1])) * (2 - int(p[1])));
  });
  const size_t counts[] = {3, 3};
  const BeamSearchResult r = beam_search(counts, land, {.beam_width = 2});
  EXPECT_EQ(best_point(r), (TunePoint{2, 2}));
  EXPECT_TRUE(std::any_of(r.evaluated.begin(), r.evaluated.end(), [](const auto& s) { return !s.cost; }));
}

TEST(BeamSearch, AFailedStartEndsTheSearch) {
  Landscape land([](const TunePoint& p) -> std::optional<double> {
    if (p == TunePoint{0}) return std::nullopt;
    return 1.0;
  });
  const size_t counts[] = {3};
  const BeamSearchResult r = beam_search(counts, land);
  EXPECT_FALSE(r.found);
  EXPECT_EQ(r.evaluated.size(), 1u);
}

TEST(BeamSearch, ExhaustsASmallGridAndRespectsMaxRounds) {
  Landscape all([](const TunePoint& p) { return std::optional(100.0 - double(p[0] * 3 + p[1])); });
  const size_t counts[] = {3, 3};
  const BeamSearchResult r = beam_search(counts, all, {.beam_width = 9});
  EXPECT_EQ(all.seen.size(), 9u);
  EXPECT_EQ(best_point(r), (TunePoint{2, 2}));

  Landscape capped(two_steps);
  const size_t square[] = {2, 2};
  const BeamSearchResult one = beam_search(square, capped, {.beam_width = 1, .max_rounds = 1});
  EXPECT_EQ(one.rounds, 1u);
  EXPECT_EQ(best_point(one), (TunePoint{1, 0}));
}

TEST(BeamSearch, RejectsABadConfiguration) {
  Landscape land([](const TunePoint&) { return std::optional(1.0); });
  const size_t counts[] = {2};
  EXPECT_EQ(test::expect_error([&] { beam_search(counts, land, {.beam_width = 0}); }).kind(), ErrorKind::Validation);
  const size_t empty[] = {2, 0};
  EXPECT_EQ(test::expect_error([&] { beam_search(empty, land); }).kind(), ErrorKind::Validation);
}

}  // namespace
}  // namespace svod
