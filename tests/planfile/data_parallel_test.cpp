// examples/data_parallel, the data-parallel MLP training plan, trained for
// 10 steps on 1 to 4 local ranks (threads of this process, each with
// its own loaded plan and a local communicator): every rank must end with
// bitwise the same weights, those weights must match the one-rank run over
// the whole batch within float tolerance (the gradient sums are split
// differently, so the bits may differ) and make_data.py's float64 reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "svod/base/npy.h"
#include "svod/comm/communicator.h"
#include "svod/planfile/plan_file.h"

namespace svod {
namespace {

constexpr int kSteps = 10;  // make_data.py's STEPS
const std::filesystem::path kExample = SVOD_SOURCE_DIR "/examples/data_parallel";
const std::vector<std::string> kWeights = {"w1", "b1", "w2", "b2"};

// One rank's weights after training, in kWeights order, as raw floats.
using Weights = std::vector<std::vector<float>>;

// Trains kSteps steps on `ranks` local ranks; returns every rank's weights.
std::vector<Weights> train(int ranks) {
  const PlanFile file = parse_plan_file(kExample / "plan.json");
  std::vector<Weights> weights(ranks);
  run_local_ranks(ranks, [&](Communicator& comm) {
    LoadedPlan loaded = load_plan(file, LoadOptions{.communicator = borrowed(comm)});
    for (int step = 0; step < kSteps; ++step) loaded.execute();
    for (const auto& name : kWeights) {
      const auto span = loaded.plan.buffer(*loaded.plan.find_buffer(name)).span<float>();
      weights[comm.rank()].emplace_back(span.begin(), span.end());
    }
  });
  return weights;
}

// The largest |got - want| / (atol + rtol |want|) over one weight; <= 1 passes.
double worst_ratio(const std::vector<float>& got, const std::vector<double>& want, double rtol, double atol) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]) / (atol + rtol * std::abs(want[i])));
  return worst;
}

std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<double> reference(const std::string& name) {
  const NpyArray array = read_npy(kExample / ("step" + std::to_string(kSteps) + "_" + name + ".npy"));
  EXPECT_EQ(array.dtype, DType::F64);
  std::vector<double> values(array.data.size() / sizeof(double));
  std::memcpy(values.data(), array.data.data(), array.data.size());
  return values;
}

class DataParallelExample : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { one_rank_ = new std::vector<Weights>(train(1)); }
  static void TearDownTestSuite() { delete one_rank_; }
  static std::vector<Weights>* one_rank_;
};
std::vector<Weights>* DataParallelExample::one_rank_ = nullptr;

TEST_F(DataParallelExample, OneRankMatchesTheFloat64Reference) {
  const Weights& w = (*one_rank_)[0];
  for (size_t k = 0; k < kWeights.size(); ++k) {
    SCOPED_TRACE(kWeights[k]);
    EXPECT_LE(worst_ratio(w[k], reference(kWeights[k]), 1e-4, 1e-5), 1.0);
  }
}

void check_ranks(int ranks, const Weights& one_rank) {
  const std::vector<Weights> trained = train(ranks);
  ASSERT_EQ(trained.size(), size_t(ranks));
  for (size_t k = 0; k < kWeights.size(); ++k) {
    SCOPED_TRACE(kWeights[k]);
    for (int r = 1; r < ranks; ++r) {
      ASSERT_EQ(trained[r][k].size(), trained[0][k].size());
      EXPECT_EQ(std::memcmp(trained[r][k].data(), trained[0][k].data(), trained[0][k].size() * sizeof(float)), 0)
          << "rank " << r << "'s weights differ from rank 0's";
    }
    EXPECT_LE(worst_ratio(trained[0][k], as_doubles(one_rank[k]), 1e-4, 1e-6), 1.0);
    EXPECT_LE(worst_ratio(trained[0][k], reference(kWeights[k]), 1e-4, 1e-5), 1.0);
  }
}

TEST_F(DataParallelExample, TwoRanksAgreeBitwiseAndMatchOneRank) { check_ranks(2, (*one_rank_)[0]); }
// 64 rows do not split evenly over 3 ranks: shards of 21, 21 and 22 rows.
TEST_F(DataParallelExample, ThreeUnevenShardsAgreeBitwiseAndMatchOneRank) { check_ranks(3, (*one_rank_)[0]); }
TEST_F(DataParallelExample, FourRanksAgreeBitwiseAndMatchOneRank) { check_ranks(4, (*one_rank_)[0]); }

}  // namespace
}  // namespace svod
