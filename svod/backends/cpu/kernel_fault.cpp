#include "svod/backends/cpu/kernel_fault.h"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "svod/backends/cpu/cpu_device.h"
#include "svod/guard/guarded_memory.h"

namespace svod {

SVOD_HOT_THREAD_LOCAL const KernelFrame* running_kernel = nullptr;

namespace detail {
SVOD_HOT_THREAD_LOCAL bool fault_stack_ready = false;
}  // namespace detail

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr size_t kStackBytes = 64 * 1024;

std::mutex install_mutex;
struct sigaction previous_action[NSIG];  // what each signal had before svod's handler
std::atomic<bool> handed_on{false};      // a kernel's fault went to the previous handler

// Text built in a fixed array: a signal handler may not allocate.
class Report {
 public:
  Report& operator<<(std::string_view s) {
    for (char c : s)
      if (used_ < sizeof text_) text_[used_++] = c;
    return *this;
  }
  Report& number(uint64_t v) {
    char digits[24];
    size_t n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) *this << std::string_view(&digits[--n], 1);
    return *this;
  }
  Report& hex(uint64_t v) {
    static constexpr char kDigits[] = "0123456789abcdef";
    *this << "0x";
    int shift = 60;
    while (shift > 0 && (v >> shift) == 0) shift -= 4;
    for (; shift >= 0; shift -= 4) *this << std::string_view(&kDigits[(v >> shift) & 15], 1);
    return *this;
  }
  void write() const {
    size_t done = 0;
    while (done < used_) {
      const ssize_t n = ::write(STDERR_FILENO, text_ + done, used_ - done);
      if (n <= 0) return;
      done += static_cast<size_t>(n);
    }
  }

 private:
  char text_[4096];
  size_t used_ = 0;
};

// ", plan op 2 (layer3)" when a plan op is running.
void name_op(Report& r, const RunningOp* op) {
  if (op == nullptr) return;
  r << ", plan op ";
  r.number(op->index);
  if (const std::string& label = op->label(op->plan, op->index); !label.empty()) r << " (" << label << ")";
}

std::string_view describe(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (misaligned or unmapped memory)";
    case SIGILL: return "SIGILL (illegal instruction, e.g. __builtin_trap)";
    case SIGFPE: return "SIGFPE (arithmetic fault, e.g. integer division by zero)";
    case SIGABRT: return "SIGABRT (the kernel called abort())";
    default: return "a fatal signal";
  }
}

// "f32[1024]": the parameter's dtype and how many elements `bytes` hold;
// "1024 bytes" for an untyped one.
void describe_size(Report& r, const BufferParam& b, uint64_t bytes) {
  if (!b.dtype) {
    r.number(bytes) << " bytes";
    return;
  }
  r << to_string(*b.dtype) << "[";
  r.number(bytes / size_of(*b.dtype)) << "]";
}

// The buffer argument that starts in [data, data + bytes] (the guarded
// allocation hit), preferring one that starts at `data`; -1 for none.
int argument_in(const KernelFrame& k, uint64_t data, uint64_t bytes) {
  int found = -1;
  for (size_t i = 0; i < k.program->spec().buffers.size(); ++i) {
    if (k.args[i] < data || k.args[i] > data + bytes) continue;
    if (found < 0 || k.args[i] == data) found = static_cast<int>(i);
  }
  return found;
}

// Checked mode: the address is in the guard page (or gap) of a guarded
// allocation; says how far past its end or before its start, in the
// elements of the argument that points into it.
void locate_guarded(Report& r, const KernelFrame& k, uint64_t address, const GuardHit& hit, const char* access) {
  const ProgramSpec& spec = k.program->spec();
  const int arg = argument_in(k, hit.data, hit.bytes);
  const uint64_t start = arg >= 0 ? k.args[arg] : hit.data;
  const uint64_t end = hit.data + hit.bytes;
  r << "  checked mode: " << access << " ";
  if (hit.after) r.number(address - end) << " bytes past the end of ";
  else r.number(start - address) << " bytes before the start of ";
  if (arg < 0) {
    r << "a buffer of ";
    r.number(hit.bytes) << " bytes at ";
    r.hex(hit.data) << " (not one of this kernel's arguments)\n";
    return;
  }
  const BufferParam& b = spec.buffers[static_cast<size_t>(arg)];
  r << "buffer ";
  r.number(static_cast<uint64_t>(arg)) << " (\"" << b.name << "\", ";
  describe_size(r, b, end - start);
  r << ")";
  if (b.dtype) {
    const uint64_t size = size_of(*b.dtype);
    r << " at element ";
    if (hit.after) r.number((address - start) / size);
    else (r << "-").number((start - address + size - 1) / size);
  }
  r << "\n";
}

// Where `address` lies relative to the kernel's buffer arguments.
void locate(Report& r, const KernelFrame& k, uint64_t address, const char* access) {
  const ProgramSpec& spec = k.program->spec();
  if (address < 4096) {
    r << "  the address is in the first page: a NULL pointer dereference\n";
    return;
  }
  if (GuardHit hit; find_guard(address, hit)) {
    locate_guarded(r, k, address, hit, access);
    return;
  }
  size_t nearest = spec.buffers.size();
  for (size_t i = 0; i < spec.buffers.size(); ++i)
    if (k.args[i] <= address && (nearest == spec.buffers.size() || k.args[i] > k.args[nearest])) nearest = i;
  if (nearest == spec.buffers.size()) {
    r << "  the address lies before every buffer argument\n";
    return;
  }
  const BufferParam& b = spec.buffers[nearest];
  const uint64_t offset = address - k.args[nearest];
  r << "  the address is ";
  r.number(offset) << " bytes";
  if (b.dtype) {
    r << " (" << to_string(*b.dtype) << " element ";
    r.number(offset / size_of(*b.dtype)) << ")";
  }
  r << " past the start of buffer ";
  r.number(nearest) << " (\"" << b.name << "\") at ";
  r.hex(k.args[nearest]) << "; a kernel that goes past its buffer's end lands here (SVOD_CHECK=memory stops "
                             "it at the first byte past the end)\n";
}

// "wrote" or "read" for a memory fault, from the page-fault error code the
// kernel passes on x86-64; "accessed" elsewhere.
const char* access_kind(const void* context) {
#if defined(__x86_64__)
  const auto* uc = static_cast<const ucontext_t*>(context);
  return (uc->uc_mcontext.gregs[REG_ERR] & 2) ? "wrote" : "read";
#else
  (void)context;
  return "accessed";
#endif
}

void report(int signal, const siginfo_t* info, const void* context, const KernelFrame& k) {
  Report r;
  r << "\nsvod: kernel fault: " << describe(signal);
  // A general-protection fault (x86-64: a non-canonical address, such as a
  // garbage pointer or a wildly overflowed index) comes with no address.
  const bool unknown_address = signal == SIGSEGV && info->si_code == SI_KERNEL;
  const bool memory = (signal == SIGSEGV || signal == SIGBUS) && !unknown_address;
  if (memory) {
    r << " at address ";
    r.hex(reinterpret_cast<uint64_t>(info->si_addr));
  }
  if (unknown_address) r << " at an address the processor does not report (a non-canonical pointer?)";
  r << "\n  in program \"" << k.program->spec().display_name() << "\" (entry " << k.program->spec().entry
    << ") on CPU";
  if (k.slice >= 0) {
    r << ", core_id slice ";
    r.number(static_cast<uint64_t>(k.slice));
  }
  name_op(r, k.op);
  r << "\n";
  if (memory) locate(r, k, reinterpret_cast<uint64_t>(info->si_addr), access_kind(context));
  r << "svod: after a fault in a kernel the process cannot safely go on; it ends with the signal\n";
  r.write();
}

// Reports a fault in a kernel, then puts back the handler that was there
// before svod's and lets the signal happen again under it: a fault
// re-executes the faulting instruction on return, a sent or raised signal is
// raised again (it stays blocked until this handler returns). Once a
// kernel's fault was handed on, anything that comes back here ends the
// process with the default action: a handler that re-raises (LLVM's crash
// recovery does, outside a compile) would otherwise pass the signal to and
// fro for ever.
void on_fault(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (handed_on.load()) {
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigaction(signal, &fallback, nullptr);
  } else {
    if (const KernelFrame* k = running_kernel; k != nullptr) {
      report(signal, info, context, *k);
      handed_on.store(true);
    }
    sigaction(signal, &previous_action[signal], nullptr);
  }
  if (info->si_code <= 0) raise(signal);
  errno = saved_errno;
}

// exit() called by a kernel: the process would run its exit handlers and
// static destructors on the kernel's thread, and the thread pool's would wait
// for that very thread. Registered once, after the runtime's statics, so it
// runs before them: a kernel that exits is named and the process ends at
// once with kKernelExitStatus — never a silent 0, never a hang.
void on_exit() {
  const KernelFrame* k = running_kernel;
  if (k == nullptr) return;
  Report r;
  r << "\nsvod: program \"" << k->program->spec().display_name() << "\" called exit() while running on CPU";
  name_op(r, k->op);
  r << "; the process ends with status ";
  r.number(kKernelExitStatus) << "\n";
  r.write();
  _exit(kKernelExitStatus);
}

bool ours(const struct sigaction& a) { return (a.sa_flags & SA_SIGINFO) && a.sa_sigaction == on_fault; }

// Unmaps this thread's alternate stack when the thread ends.
struct FaultStack {
  void* memory = nullptr;
  ~FaultStack() {
    if (memory == nullptr) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
    munmap(memory, kStackBytes);
  }
};
thread_local FaultStack fault_stack;

}  // namespace

namespace detail {

void prepare_fault_stack() noexcept {
  fault_stack_ready = true;
  stack_t current{};
  if (sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE)) return;  // the thread has one
  void* memory = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return;  // faults are still reported, stack overflows not
  stack_t stack{};
  stack.ss_sp = memory;
  stack.ss_size = kStackBytes;
  if (sigaltstack(&stack, nullptr) != 0) {
    munmap(memory, kStackBytes);
    return;
  }
  fault_stack.memory = memory;
}

}  // namespace detail

void ensure_fault_reporting() {
  std::lock_guard lock(install_mutex);
  static const bool exit_hook = std::atexit(on_exit) == 0;
  (void)exit_hook;
  for (int signal : kSignals) {
    struct sigaction current {};
    if (sigaction(signal, nullptr, &current) != 0 || ours(current)) continue;
    struct sigaction handler {};
    handler.sa_sigaction = on_fault;
    handler.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&handler.sa_mask);
    sigaction(signal, &handler, &previous_action[signal]);
  }
}

}  // namespace svod
