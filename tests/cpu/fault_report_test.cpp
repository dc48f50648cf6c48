// The fault reports' texts and where a faulting address lies
// (backends/cpu/fault_report.h, fault_location.h), built from faults and
// launches given as data: no signal is raised. tests/device/kernel_fault_test.cpp
// checks the same texts from real faults.
#include "svod/backends/cpu/fault_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <string>
#include <vector>

#include "svod/backends/cpu/fault_location.h"

namespace svod {
namespace {

using ::testing::HasSubstr;

// A launch of program "mm" (entry mm_k) with an f32 buffer "a" at 0x10000
// and an untyped buffer "raw" at 0x40000.
class FaultReport : public ::testing::Test {
 protected:
  std::vector<BufferParam> buffers{{"a", Access::Write, DType::F32, {}}, {"raw", Access::Read, std::nullopt, {}}};
  uint64_t args[3] = {0x10000, 0x40000, 7};
  LaunchView launch{"mm", "mm_k", buffers, args, -1, nullptr};

  static TrappedFault segv(uint64_t address, MemoryAccess access = MemoryAccess::Unknown, uint64_t sp = 0x7f0000000000) {
    TrappedFault f{};
    f.signal = SIGSEGV;
    f.code = SEGV_MAPERR;
    f.address = address;
    f.pc = 0x5000;
    f.sp = sp;
    f.access = access;
    return f;
  }

  // The report describe_trapped builds for `f`, where place_of would put it
  // given the guarded allocation `guard`.
  std::string trapped(const TrappedFault& f, const GuardHit* guard = nullptr) const {
    Report r;
    std::optional<Place> place;
    if (address_known(f)) place = locate(launch, f.address, f.sp, guard);
    describe_trapped(r, launch, f, place ? &*place : nullptr);
    return r.str();
  }
};

const std::string& id_or_label_of(const void* plan, size_t) { return *static_cast<const std::string*>(plan); }

TEST_F(FaultReport, AnAddressPastABufferNamesItsElementAndTheCheckThatWouldStopIt) {
  const TrappedFault f = segv(0x10000 + 4 * 70 + 2, MemoryAccess::Write);
  EXPECT_EQ(trapped(f),
            "kernel fault: SIGSEGV (invalid memory access) at address 0x1011a\n"
            "  in program \"mm\" (entry mm_k) on CPU\n"
            "  the address is 282 bytes (f32 element 70) past the start of buffer 0 (\"a\") at 0x10000; a kernel "
            "that goes past its buffer's end lands here (SVOD_CHECK=memory stops it at the first byte past the end)\n"
            "  the kernel was stopped at the fault and the launch failed; what it wrote before stays written");
  const Place p = locate(launch, f.address, f.sp, nullptr);
  EXPECT_EQ(p.kind, Place::Past);
  EXPECT_EQ(p.buffer, 0);
  EXPECT_EQ(p.element, 70);
  EXPECT_EQ(cause_of(p.kind), "out of bounds");
}

TEST_F(FaultReport, AnAddressInsideAnUntypedBufferIsInBytesAndTheNearestBufferBelowIsNamed) {
  // 0x40010 lies past the start of both buffers: "raw" starts nearer.
  const std::string text = trapped(segv(0x40010));
  EXPECT_THAT(text, HasSubstr("  the address is 16 bytes past the start of buffer 1 (\"raw\") at 0x40000; "));
  const Place p = locate(launch, 0x40010, 0x7f0000000000, nullptr);
  EXPECT_EQ(p.buffer, 1);
  EXPECT_FALSE(p.element_known);
}

TEST_F(FaultReport, AnAddressInAGuardNamesTheBufferItsSizeAndTheElementOnEitherSide) {
  // A guarded allocation of 64 bytes (f32[16]) at buffer 0's address.
  const GuardHit after{0x10000, 64, true};
  EXPECT_THAT(trapped(segv(0x10000 + 64 + 8, MemoryAccess::Write), &after),
              HasSubstr("  in program \"mm\" (entry mm_k) on CPU\n"
                        "  checked mode: wrote 8 bytes past the end of buffer 0 (\"a\", f32[16]) at element 18\n"
                        "  the kernel was stopped"));
  const GuardHit before{0x10000, 64, false};
  EXPECT_THAT(trapped(segv(0x10000 - 4, MemoryAccess::Read), &before),
              HasSubstr("  checked mode: read 4 bytes before the start of buffer 0 (\"a\", f32[16]) at element -1\n"));
  // A view into the allocation: the extent runs from the argument to the allocation's end.
  args[0] = 0x10000 + 16;
  const Place view = locate(launch, 0x10000 + 64, 0, &after);
  EXPECT_EQ(view.kind, Place::Guarded);
  EXPECT_EQ(view.extent, 48u);
  EXPECT_EQ(view.element, 12);
  EXPECT_EQ(cause_of(view.kind), "out of bounds (checked mode)");
}

TEST_F(FaultReport, AGuardOfNoArgumentNamesTheAllocationAndAnUnknownAccessIsAnAccess) {
  const GuardHit other{0x900000, 4096, true};
  EXPECT_THAT(trapped(segv(0x900000 + 4096, MemoryAccess::Unknown), &other),
              HasSubstr("  checked mode: accessed 0 bytes past the end of a buffer of 4096 bytes at 0x900000 (not one "
                        "of this kernel's arguments)\n"));
  // An untyped buffer's guard: its size in bytes, no element.
  const GuardHit raw{0x40000, 100, true};
  EXPECT_THAT(trapped(segv(0x40000 + 100, MemoryAccess::Read), &raw),
              HasSubstr("  checked mode: read 0 bytes past the end of buffer 1 (\"raw\", 100 bytes)\n"));
}

TEST_F(FaultReport, TheArgumentAtTheGuardedAllocationsStartIsPreferred) {
  args[1] = 0x10000 + 32;  // a view inside buffer 0's allocation
  EXPECT_EQ(argument_in(launch, 0x10000, 64), 0);
  args[0] = 0x20000;
  EXPECT_EQ(argument_in(launch, 0x10000, 64), 1);
  EXPECT_EQ(argument_in(launch, 0x50000, 64), -1);
}

TEST_F(FaultReport, AnAddressJustBelowTheStackPointerIsAStackOverflow) {
  const uint64_t sp = 0x7f0000100000;
  EXPECT_THAT(trapped(segv(sp - 8, MemoryAccess::Write, sp)),
              HasSubstr("  the address is just below the stack pointer: a stack overflow (a deep recursion or a large "
                        "local array)\n"));
  EXPECT_EQ(locate(launch, sp - kStackReach + 1, sp, nullptr).kind, Place::Stack);
  EXPECT_EQ(locate(launch, sp - kStackReach - 4096, sp, nullptr).kind, Place::Past);
  EXPECT_EQ(cause_of(Place::Stack), "stack overflow");
}

TEST_F(FaultReport, TheFirstPageIsNullAndBelowEveryBufferIsAWildAddress) {
  EXPECT_THAT(trapped(segv(0x10)), HasSubstr("at address 0x10\n  in program \"mm\" (entry mm_k) on CPU\n"
                                             "  the address is in the first page: a NULL pointer dereference\n"));
  EXPECT_THAT(trapped(segv(0x8000)), HasSubstr("  the address lies before every buffer argument\n"));
  EXPECT_EQ(cause_of(locate(launch, 0x8000, 0, nullptr).kind), "wild address");
  EXPECT_EQ(cause_of(locate(launch, 0, 0, nullptr).kind), "null pointer");
}

TEST_F(FaultReport, AGeneralProtectionFaultHasNoAddressAndNoPlace) {
  TrappedFault f = segv(0);
  f.code = SI_KERNEL;
  EXPECT_FALSE(address_known(f));
  EXPECT_FALSE(place_of(launch, f).has_value());
  EXPECT_EQ(trapped(f),
            "kernel fault: SIGSEGV (invalid memory access) at an address the processor does not report (a "
            "non-canonical pointer or a misaligned vector access?)\n"
            "  in program \"mm\" (entry mm_k) on CPU\n"
            "  the kernel was stopped at the fault and the launch failed; what it wrote before stays written");
  EXPECT_THAT(std::string(cause_without_address(SIGSEGV)), HasSubstr("general protection"));
}

TEST_F(FaultReport, FaultsWithoutAnAddressNameTheSignalOnly) {
  TrappedFault f{};
  f.signal = SIGFPE;
  f.code = FPE_INTDIV;
  EXPECT_EQ(trapped(f),
            "kernel fault: SIGFPE (arithmetic fault, e.g. integer division by zero)\n"
            "  in program \"mm\" (entry mm_k) on CPU\n"
            "  the kernel was stopped at the fault and the launch failed; what it wrote before stays written");
  EXPECT_EQ(cause_without_address(SIGFPE), "arithmetic fault");
  EXPECT_EQ(cause_without_address(SIGILL), "illegal instruction");
  EXPECT_EQ(cause_without_address(SIGTRAP), "breakpoint");
  EXPECT_EQ(signal_name(SIGTRAP), "SIGTRAP");
  EXPECT_EQ(signal_name(SIGUSR1), "a fatal signal");
}

TEST_F(FaultReport, TheLaunchIsNamedWithItsSliceItsPlanOpAndTheFunctionItCalled) {
  const std::string id = "layer3";
  const RunningOp op{2, &id, id_or_label_of, nullptr};
  launch.slice = 5;
  launch.op = &op;
  TrappedFault f = segv(0x40);
  f.in_callee = true;
  f.pc = 0x7ffff7abc123;
  EXPECT_THAT(trapped(f), HasSubstr("  in program \"mm\" (entry mm_k) on CPU, core_id slice 5, op 2 (layer3), "
                                    "in a function it called (at 0x7ffff7abc123)\n"));
  const std::string unnamed;
  const RunningOp bare{4, &unnamed, id_or_label_of, nullptr};
  launch.op = &bare;
  Report r;
  name_launch(r, launch);
  EXPECT_EQ(r.str(), "program \"mm\" (entry mm_k) on CPU, core_id slice 5, op 4");
}

TEST_F(FaultReport, AStoppedKernelNamesTheLaunchAndTheReason) {
  launch.slice = 1;
  Report r;
  describe_stopped(r, launch, "the time limit of 0.5 s passed");
  EXPECT_EQ(r.str(), "kernel stopped: program \"mm\" (entry mm_k) on CPU, core_id slice 1: the time limit of 0.5 s "
                     "passed; the launch failed and what it wrote before stays written");
}

TEST_F(FaultReport, AHandedOnFaultSaysWhyTheProcessEndsAndWhatToRerunWith) {
  const TrappedFault f = segv(0x10);
  const Place p = locate(launch, f.address, f.sp, nullptr);
  Report traps;
  describe_handed_on(traps, launch, f, &p, NotStopped::NotOwnCode);
  EXPECT_EQ(traps.str(),
            "\nsvod: kernel fault: SIGSEGV (invalid memory access) at address 0x10\n"
            "  in program \"mm\" (entry mm_k) on CPU\n"
            "  the address is in the first page: a NULL pointer dereference\n"
            "svod: the fault is not in the kernel's own code (or the signal was sent), so it cannot be stopped there "
            "and the process cannot safely go on; it ends with the signal\n"
            "svod: to find the cause, rerun with --check (SVOD_CHECK=memory; svod.checked() in Python), which stops "
            "an overrun at its first byte, or run the plan with svod run --isolate, which names the op the process "
            "ended in\n");
  Report refuses;
  describe_handed_on(refuses, launch, f, &p, NotStopped::NoTrampoline);
  EXPECT_THAT(refuses.str(), HasSubstr("\nsvod: kernels are stopped at a fault only on x86-64 and AArch64; after a "
                                       "fault here the process cannot safely go on; it ends with the signal\n"));
  Report called_back;
  describe_handed_on(called_back, launch, f, &p, NotStopped::CalledBack);
  EXPECT_THAT(called_back.str(), HasSubstr("\nsvod: the C library called this code back"));
  Report child;
  describe_handed_on(child, launch, f, &p, NotStopped::ForkedChild);
  EXPECT_THAT(child.str(), HasSubstr("\nsvod: the fault is in a child process the kernel forked, which must not go on "
                                     "as its parent; the child ends with the signal\n"));
}

// A fatal signal outside any kernel: what it suggests, the program launched
// last, the op running on the thread, and what to rerun with.
TEST_F(FaultReport, ADeathOutsideAnyKernelNamesTheLastProgramAndWhatTheSignalSuggests) {
  TrappedFault abort_signal{};
  abort_signal.signal = SIGABRT;
  abort_signal.code = SI_TKILL;
  Report heap;
  describe_death(heap, Death{abort_signal, "mm", nullptr});
  EXPECT_THAT(heap.str(), HasSubstr("\nsvod: fatal signal: SIGABRT, raised or sent, outside any kernel\n"
                                    "  the last program svod launched in this process: \"mm\"\n"
                                    "  abort() outside a kernel is most often the C library finding its heap corrupted"));
  EXPECT_THAT(heap.str(), HasSubstr("svod: the process ends with the signal\nsvod: to find the cause, rerun with --check"));
  TrappedFault jump = segv(0x4100);
  jump.code = SEGV_MAPERR;
  jump.pc = 0x4100;
  const std::string id = "layer3";
  const RunningOp op{2, &id, id_or_label_of, nullptr};
  Report smashed;
  describe_death(smashed, Death{jump, nullptr, &op});
  EXPECT_THAT(smashed.str(), HasSubstr("\nsvod: fatal signal: SIGSEGV (invalid memory access) at address 0x4100 outside "
                                       "any kernel\n  running on this thread: op 2 (layer3)\n  at pc 0x4100, in no "
                                       "kernel's code: svod's, a library's or the host's code, or no code at all (the "
                                       "processor jumped there); a kernel that overruns a local array upwards"));
  EXPECT_THAT(smashed.str(), Not(HasSubstr("the last program")));
}

TEST_F(FaultReport, FaultsOutsideALaunchNameTheProgramOrTheKernelsInFlight) {
  TrappedFault f = segv(0x10);
  f.pc = 0x7000;
  Report unlaunched;
  describe_unlaunched(unlaunched, "k", f);
  EXPECT_THAT(unlaunched.str(), HasSubstr("\nsvod: kernel fault: SIGSEGV (invalid memory access) at address 0x10\n"
                                          "  in the code of program \"k\" (at 0x7000) on a thread that runs no svod "
                                          "launch"));
  const KernelLister two = [](void (*each)(const char*, void*), void* context) -> size_t {
    each("op 1 (mm) kernel mm", context);
    each("op 4 (add) kernel add", context);
    return 2;
  };
  f.signal = SIGFPE;
  f.code = FPE_INTDIV;
  Report in_flight;
  describe_in_flight(in_flight, f, two);
  EXPECT_EQ(in_flight.str(),
            "\nsvod: kernel fault: SIGFPE (arithmetic fault, e.g. integer division by zero) on a thread svod did not "
            "start, while these device kernels ran on host threads:\n"
            "  op 1 (mm) kernel mm\n"
            "  op 4 (add) kernel add\n"
            "svod: a kernel on a device's own threads cannot be stopped; the process ends with the signal\n");
}

TEST_F(FaultReport, AKernelThatCalledExitIsNamedWithTheStatus) {
  const std::string id = "layer3";
  const RunningOp op{2, &id, id_or_label_of, nullptr};
  launch.op = &op;
  Report r;
  describe_exit(r, launch, 70);
  EXPECT_EQ(r.str(), "\nsvod: program \"mm\" called exit() while running on CPU, op 2 (layer3); the process "
                     "ends with status 70\n");
}

TEST_F(FaultReport, NumbersAndTextBeyondTheArrayAreLeftOut) {
  Report r;
  r.number(0) << " ";
  r.number(18446744073709551615ull) << " ";
  r.hex(0) << " ";
  r.hex(0xdeadbeef);
  EXPECT_EQ(r.str(), "0 18446744073709551615 0x0 0xdeadbeef");
  Report full;
  for (int i = 0; i < 1000; ++i) full << "12345678";
  EXPECT_EQ(full.text().size(), 4096u);
  EXPECT_EQ(element_at(-1, 4), -1);
  EXPECT_EQ(element_at(-5, 4), -2);
  EXPECT_EQ(element_at(7, 4), 1);
}

}  // namespace
}  // namespace svod
