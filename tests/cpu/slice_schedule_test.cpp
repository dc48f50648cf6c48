// SliceSchedule (issue 39, item 4): which way a launch of several slices
// runs, from the launches' own times — spread over the pool while that is
// faster, alone on the caller while the pool's threads are held up by other
// processes, probing the other way now and then.
#include "svod/program/slice_schedule.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace svod {
namespace {

// Runs `launches` launches that take `spread_ns` spread and `alone_ns` alone;
// returns how many ran alone.
int run(SliceSchedule& s, int launches, int64_t spread_ns, int64_t alone_ns) {
  int alone = 0;
  for (int i = 0; i < launches; ++i) {
    const SliceSchedule::Choice c = s.next();
    alone += !c.spread;
    s.record(c, c.spread ? spread_ns : alone_ns);
  }
  return alone;
}

TEST(SliceSchedule, SpreadsWhileThatIsFasterProbingAloneRarely) {
  SliceSchedule s;
  EXPECT_EQ(run(s, static_cast<int>(SliceSchedule::kFirstProbe) - 1, 30'000, 50'000), 0);
  // The first probe: two launches alone, the second measured.
  EXPECT_EQ(run(s, 2, 30'000, 50'000), 2);
  EXPECT_EQ(s.alone_ns(), 50'000);
  EXPECT_EQ(s.spread_ns(), 30'000);
  EXPECT_EQ(run(s, 4 * SliceSchedule::kProbe, 30'000, 50'000), 8);  // two per probe
}

TEST(SliceSchedule, RunsAloneWhileThePoolIsHeldUpAndSpreadsAgainOnceItIsNot) {
  SliceSchedule s;
  run(s, SliceSchedule::kProbe + 1, 30'000, 50'000);  // through the second probe
  // The machine gets busy: spread launches wait for a preempted pool thread.
  const int alone = run(s, 4 * SliceSchedule::kProbe, 400'000, 52'000);
  EXPECT_GT(alone, 3 * static_cast<int>(SliceSchedule::kProbe)) << "spread " << s.spread_ns();
  EXPECT_NEAR(s.alone_ns(), 52'000, 100);
  // Quiet again: the next probe of the pool brings the launches back to it.
  run(s, SliceSchedule::kProbe, 30'000, 52'000);
  EXPECT_EQ(run(s, SliceSchedule::kProbe - 4, 30'000, 52'000), 0);
}

TEST(SliceSchedule, OneStallDoesNotTurnAProgramAwayFromThePool) {
  SliceSchedule s;
  run(s, SliceSchedule::kProbe + 1, 30'000, 50'000);  // through the second probe
  EXPECT_EQ(run(s, 1, 5'000'000, 50'000), 0);  // a 5 ms stall counts as 60 µs
  EXPECT_LE(s.spread_ns(), 34'000);
  EXPECT_EQ(run(s, 100, 30'000, 50'000), 0);
}

TEST(SliceSchedule, NearATieThePoolIsKept) {
  SliceSchedule s;
  run(s, SliceSchedule::kProbe + 1, 52'000, 50'000);  // alone 4% faster: not a tenth
  EXPECT_EQ(run(s, SliceSchedule::kProbe - 4, 52'000, 50'000), 0);
  SliceSchedule t;
  run(t, SliceSchedule::kProbe + 1, 60'000, 50'000);  // a sixth faster: alone
  EXPECT_EQ(run(t, 100, 60'000, 50'000), 100);
}

}  // namespace
}  // namespace svod
