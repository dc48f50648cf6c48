// What a launch throws after the handler resumed it at the launch boundary,
// built in normal context: the KernelFault of a trapped fault or of a call
// of exit() and its kin, the stop scope's error for a stopped kernel.
#include <fmt/format.h>

#include <string>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/backends/cpu/fault_report.h"
#include "svod/backends/cpu/kernel_fault.h"
#include "svod/base/error.h"

namespace svod {
namespace detail {

LaunchView launch_view(const KernelFrame& k) noexcept {
  const ProgramSpec& spec = k.program->spec();
  return {spec.display_name(), spec.entry, spec.buffers, k.args, k.slice, k.op};
}

namespace {

// The program, entry, slice and plan op of a frame, as KernelFaultInfo.
KernelFaultInfo launch_fault_info(const KernelFrame& k) {
  KernelFaultInfo info;
  info.program = k.program->spec().display_name();
  info.entry = k.program->spec().entry;
  info.slice = k.slice;
  if (k.op != nullptr) {
    info.op = k.op->index;
    info.op_label = k.op->id_or_label(k.op->plan, k.op->index);
  }
  return info;
}

// The launch of a kernel its stop scope stopped fails with the scope's error.
[[noreturn]] void throw_stopped(const KernelFrame& k) {
  Report r;
  describe_stopped(r, launch_view(k), k.stopped->reason());
  throw Error(k.stopped->kind(), r.str());
}

// The launch of a kernel stopped at its call of exit() or its kin, or of pthread_exit()
// (frame.fault.call_cause, route_kernel_exits). Formatted rather than built
// in a Report: an assertion's text has no bound.
[[noreturn]] void throw_exit_call(const KernelFrame& k) {
  KernelFaultInfo info = launch_fault_info(k);
  info.cause = k.fault.call_cause;
  Report name;
  name_launch(name, launch_view(k));
  std::string message = fmt::format(
      "kernel fault: the kernel {}, which would end {}\n  in {}\n  the kernel was stopped at the call and "
      "the launch failed; what it wrote before stays written",
      info.cause, k.fault.call_ends_thread ? "its thread" : "the process", name.text());
  throw KernelFault(std::move(info), message);
}

}  // namespace

void throw_kernel_fault(const KernelFrame& k) {
  const TrappedFault& f = k.fault;
  if (f.signal == kKernelStopSignal) throw_stopped(k);
  if (f.call_cause != nullptr) throw_exit_call(k);
  const LaunchView launch = launch_view(k);
  KernelFaultInfo info = launch_fault_info(k);
  info.signal = f.signal;
  info.signal_name = signal_name(f.signal);
  info.access = f.access == MemoryAccess::Write ? "write" : f.access == MemoryAccess::Read ? "read" : "";
  info.in_called_function = f.in_callee;
  const std::optional<Place> place = place_of(launch, f);
  if (place) {
    info.address = f.address;
    info.cause = cause_of(place->kind);
    if (place->buffer >= 0) {
      info.buffer = static_cast<size_t>(place->buffer);
      info.buffer_name = launch.buffers[info.buffer.value()].name;
      if (place->element_known) info.element = place->element;
    }
  } else {
    info.cause = cause_without_address(f.signal);
  }
  Report r;
  describe_trapped(r, launch, f, place ? &*place : nullptr);
  throw KernelFault(std::move(info), r.str());
}

}  // namespace detail
}  // namespace svod
