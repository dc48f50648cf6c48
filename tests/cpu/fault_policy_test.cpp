// What svod's signal handlers do (backends/cpu/fault_policy.h), decided from
// situations given as data. The handlers' acts on real signals are checked by
// tests/device/kernel_fault_test.cpp and kernel_stop_test.cpp.
#include "svod/backends/cpu/fault_policy.h"

#include <gtest/gtest.h>

#include <signal.h>

#include "svod/guard/kernel_stop.h"

namespace svod {
namespace {

// A fault an instruction of a running kernel caused, on a machine that traps.
FaultSituation kernel_fault(int signal = SIGSEGV) {
  FaultSituation s;
  s.signal = signal;
  s.code = SEGV_MAPERR;
  s.machine_traps = true;
  s.in_launch = true;
  s.pc_in_kernel = true;
  return s;
}

TEST(FaultPolicy, AFaultOfTheKernelsOwnCodeOrOfALeafItCalledIsTrapped) {
  for (int signal : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP}) EXPECT_EQ(decide_fault(kernel_fault(signal)), FaultAction::Trap);
  FaultSituation leaf = kernel_fault();
  leaf.pc_in_kernel = false;
  leaf.returns_to_kernel = true;
  EXPECT_EQ(decide_fault(leaf), FaultAction::Trap);
  FaultSituation tail = kernel_fault();
  tail.pc_in_kernel = false;
  tail.tail_called = true;
  EXPECT_EQ(decide_fault(tail), FaultAction::Trap);
  tail.code = SI_TKILL;  // (a signal sent to it is not)
  EXPECT_EQ(decide_fault(tail), FaultAction::ReportAndHandOn);
}

TEST(FaultPolicy, AFaultDeeperThanALeafOrASignalSentOrRaisedIsReportedAndHandedOn) {
  FaultSituation deeper = kernel_fault();
  deeper.pc_in_kernel = false;
  EXPECT_EQ(decide_fault(deeper), FaultAction::ReportAndHandOn);
  FaultSituation raised = kernel_fault();
  raised.code = SI_TKILL;
  EXPECT_EQ(decide_fault(raised), FaultAction::ReportAndHandOn);
  // abort() in a library the kernel called raises SIGABRT, whatever its si_code says.
  FaultSituation abort_signal = kernel_fault(SIGABRT);
  EXPECT_EQ(decide_fault(abort_signal), FaultAction::ReportAndHandOn);
}

// Kernel code the C library called back (its lock may be held), or a child
// the kernel forked (its launch boundary is its parent's): a fault is
// reported and ends the process, a stop waits.
TEST(FaultPolicy, AFaultInCodeTheCLibraryCalledBackOrInAForkedChildIsNotTrappedNorStopped) {
  for (bool child : {false, true}) {
    FaultSituation fault = kernel_fault();
    (child ? fault.forked_child : fault.called_back) = true;
    EXPECT_EQ(decide_fault(fault), FaultAction::ReportAndHandOn);
    FaultSituation stop = kernel_fault(kKernelStopSignal);
    stop.code = SI_TKILL;
    stop.sent_by_this_process = true;
    stop.stop_requested = true;
    (child ? stop.forked_child : stop.called_back) = true;
    EXPECT_EQ(decide_fault(stop), FaultAction::LetRun);
  }
}

TEST(FaultPolicy, AMachineWithoutATrampolineNeitherTrapsNorStops) {
  FaultSituation fault = kernel_fault();
  fault.machine_traps = false;
  EXPECT_EQ(decide_fault(fault), FaultAction::ReportAndHandOn);
  FaultSituation stop = kernel_fault(kKernelStopSignal);
  stop.code = SI_TKILL;
  stop.stop_requested = true;
  stop.machine_traps = false;
  EXPECT_EQ(decide_fault(stop), FaultAction::LetRun);
}

TEST(FaultPolicy, OnceAKernelsFaultWasHandedOnTheProcessEnds) {
  FaultSituation s = kernel_fault();
  s.handed_on = true;
  EXPECT_EQ(decide_fault(s), FaultAction::EndProcess);
  s.in_launch = false;
  EXPECT_EQ(decide_fault(s), FaultAction::EndProcess);
}

TEST(FaultPolicy, OutsideALaunchOnlyRegisteredCodeAndDeviceKernelsAreReported) {
  FaultSituation s;
  s.signal = SIGSEGV;
  s.code = SEGV_MAPERR;
  s.machine_traps = true;
  EXPECT_EQ(decide_fault(s), FaultAction::HandOn);
  s.in_registered_code = true;
  EXPECT_EQ(decide_fault(s), FaultAction::ReportProgramAndHandOn);
  s.in_registered_code = false;
  s.kernels_in_flight = true;
  EXPECT_EQ(decide_fault(s), FaultAction::ReportInFlightAndHandOn);
  // PoCL steps over a kernel's division by zero with a SIGFPE handler of its own.
  s.signal = SIGFPE;
  s.code = FPE_INTDIV;
  EXPECT_EQ(decide_fault(s), FaultAction::HandOn);
  s.only_default_after = true;
  EXPECT_EQ(decide_fault(s), FaultAction::ReportInFlightAndHandOn);
  // A signal sent to a thread outside a launch is nobody's fault to report.
  s.code = SI_USER;
  s.in_registered_code = true;
  EXPECT_EQ(decide_fault(s), FaultAction::HandOn);
}

TEST(FaultPolicy, AStopStopsOnlyAKernelInItsOwnCodeAndForeignStopSignalsArePassedOn) {
  FaultSituation s = kernel_fault(kKernelStopSignal);
  s.code = SI_TKILL;
  s.sent_by_this_process = true;
  s.stop_requested = true;
  EXPECT_EQ(decide_fault(s), FaultAction::Stop);
  s.pc_in_kernel = false;
  s.returns_to_kernel = true;  // a leaf function may hold a lock
  EXPECT_EQ(decide_fault(s), FaultAction::LetRun);
  s.stop_requested = false;
  EXPECT_EQ(decide_fault(s), FaultAction::LetRun);
  s.sent_by_this_process = false;
  EXPECT_EQ(decide_fault(s), FaultAction::PassToPrevious);
  // A fault handed on before does not change what a stop signal does.
  s.handed_on = true;
  EXPECT_EQ(decide_fault(s), FaultAction::PassToPrevious);
}

}  // namespace
}  // namespace svod
