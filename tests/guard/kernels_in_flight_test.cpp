// The table of device kernels in flight on host threads that the fault
// handler reads (issue 40): noted, listed, forgotten, and a full table.
#include "svod/guard/kernels_in_flight.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace svod {
namespace {

std::vector<std::string> listed() {
  std::vector<std::string> notes;
  const size_t count = for_each_kernel_in_flight(
      [](const char* note, void* out) { static_cast<std::vector<std::string>*>(out)->push_back(note); }, &notes);
  EXPECT_EQ(count, notes.size());
  EXPECT_EQ(for_each_kernel_in_flight(nullptr, nullptr), count);
  return notes;
}

TEST(KernelsInFlight, NotedUntilForgottenAndLongNotesCut) {
  ASSERT_TRUE(listed().empty());
  const int a = note_kernel_in_flight("program \"a\" (entry a) on CL:0");
  const int b = note_kernel_in_flight(std::string(1000, 'x'));
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  auto notes = listed();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "program \"a\" (entry a) on CL:0");
  EXPECT_EQ(notes[1], std::string(191, 'x'));
  forget_kernel_in_flight(a);
  EXPECT_EQ(listed(), std::vector<std::string>{std::string(191, 'x')});
  forget_kernel_in_flight(b);
  forget_kernel_in_flight(-1);  // a kernel the full table left unnamed
  EXPECT_TRUE(listed().empty());
}

TEST(KernelsInFlight, AFullTableLeavesTheNextKernelUnnamed) {
  std::vector<int> slots;
  for (int slot; (slot = note_kernel_in_flight("k")) >= 0;) slots.push_back(slot);
  EXPECT_EQ(slots.size(), 256u);
  EXPECT_EQ(note_kernel_in_flight("one more"), -1);
  forget_kernel_in_flight(slots.back());
  slots.back() = note_kernel_in_flight("one more");  // a slot forgotten is reused
  EXPECT_GE(slots.back(), 0);
  for (int slot : slots) forget_kernel_in_flight(slot);
  EXPECT_TRUE(listed().empty());
}

}  // namespace
}  // namespace svod
