// run_isolated: a job in a child process, and how it ended as the waiting
// process sees it — its status, an exit from inside an op, a signal — with
// the ops that were running.
#include "svod/guard/isolation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <stdexcept>
#include <string>
#include <vector>

namespace svod {
namespace {

const std::vector<std::string> kTitles = {"op 0 kernel a", "op 1 copy b <- a", "op 2 kernel c"};

TEST(Isolation, AFinishedJobsStatusComesBackAndOnlyTheChildIsIsolated) {
  EXPECT_FALSE(isolated());
  const IsolatedEnd end = run_isolated([] { return isolated() ? 3 : 4; });
  EXPECT_TRUE(end.finished);
  EXPECT_TRUE(end.exited);
  EXPECT_EQ(end.status, 3);
  EXPECT_EQ(end.running, "");
  EXPECT_FALSE(isolated());
  // Outside a child, recording ops does nothing (and does not crash).
  isolation_title_ops(kTitles);
  isolation_op_started(0);
  isolation_op_finished(0);
}

TEST(Isolation, AnExitFromInsideAnOpIsNotAFinishAndNamesTheOp) {
  const IsolatedEnd end = run_isolated([] {
    isolation_title_ops(kTitles);
    isolation_op_started(0);
    isolation_op_finished(0);
    isolation_op_started(2);
    ::_exit(0);  // as a kernel calling exit_group would
    return 0;
  });
  EXPECT_FALSE(end.finished);
  EXPECT_TRUE(end.exited);
  EXPECT_EQ(end.status, 0);
  EXPECT_EQ(end.running, "op 2 kernel c");
}

TEST(Isolation, ASignalEndsOnlyTheChildNamingEveryRunningOp) {
  const IsolatedEnd end = run_isolated([] {
    isolation_title_ops(kTitles);
    isolation_op_started(0);
    isolation_op_started(1);
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
    return 0;
  });
  EXPECT_FALSE(end.finished);
  EXPECT_FALSE(end.exited);
  EXPECT_EQ(end.signal, SIGSEGV);
  EXPECT_EQ(end.running, "op 0 kernel a, op 1 copy b <- a");
}

// What the job throws is printed and ends the child with status 1.
TEST(Isolation, AJobThatThrowsEndsWithStatusOne) {
  const IsolatedEnd end = run_isolated([]() -> int { throw std::runtime_error("job failed"); });
  EXPECT_TRUE(end.finished);
  EXPECT_TRUE(end.exited);
  EXPECT_EQ(end.status, 1);
}

}  // namespace
}  // namespace svod
