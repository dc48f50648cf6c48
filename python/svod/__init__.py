"""svod: compile kernels, run them on numpy arrays without copying, and run plans.

    import numpy as np, svod
    cpu = svod.device("CPU")
    add = cpu.compile(source="void add(float* o, const float* a, const float* b, int n)"
                             "{ for (int i = 0; i < n; i++) o[i] = a[i] + b[i]; }",
                      entry="add",
                      buffers=[{"name": "o", "access": "write", "dtype": "f32"},
                               {"name": "a", "dtype": "f32"}, {"name": "b", "dtype": "f32"}],
                      scalars=[{"name": "n", "type": "i32"}])
    a = np.ones(1024, np.float32); o = np.empty_like(a)
    add(o, a, a, n=1024)          # o is written in place

Errors are svod.Error subclasses, one per kind of failure (.kind names it). Bad arguments raise
svod.ValidationError, which is also a ValueError; an argument of the wrong type raises its
subclass svod.ArgumentTypeError, also a TypeError. svod.TimeoutError is also the builtin
TimeoutError, and svod.IoError an OSError.
"""

# What svod needs of other modules, under private names and never the modules themselves: a module
# imported here would be an attribute of svod (svod.threading) to every user and their tools.
from builtins import TimeoutError as _BuiltinTimeoutError
from contextlib import contextmanager as _contextmanager
from threading import Lock as _Lock

from . import _svod, comm
from ._svod import (Buffer, BenchmarkResult, Capture, Device, DeviceInfo, Plan, PlanBuilder, Profile, Program,
                    RoundRobinResult, asbuffer, benchmark, benchmark_round_robin, choose_variant, cpu_recipe,
                    cpu_recipes, device, devices, free_cached, from_dlpack, load_package, load_plan, profile,
                    program_binary_format, time_limit)

__version__ = _svod.__version__


class Error(Exception):
    """A failure svod diagnosed. `kind` names it ("validation", "compile", ...)."""

    kind = "internal"


class ValidationError(Error, ValueError):
    """Bad arguments: counts, dtypes, sizes, bounds, names, layouts. Also a ValueError."""


class ArgumentTypeError(ValidationError, TypeError):
    """An argument of the wrong type, or a call with missing, extra or unknown arguments. Also a
    TypeError."""


class CompileError(Error):
    """The compiler refused the source; `log` holds its diagnostics."""

    log = ""


class LoadError(Error):
    """A malformed or unsupported object, relocation or section."""


class UndefinedSymbolError(Error):
    """A symbol the kernel needs (or its entry point) is missing."""


class UnsupportedError(Error):
    """A valid request this build or device cannot serve."""


class DeviceUnavailableError(Error):
    """The device, its driver or the toolchain is not present."""


class ExecutionError(Error):
    """A kernel, copy or host function failed while running."""


class PlanPoisonedError(Error):
    """A plan failed mid-run; rebuild it before running it again."""


class TimeoutError(Error, _BuiltinTimeoutError):  # noqa: A001 - svod.TimeoutError, as the kind is named
    """A process or operation ran past its time limit. Also the builtin TimeoutError (so an OSError)."""


class IoError(Error, OSError):
    """Files, pipes or processes failed. Also an OSError (its errno and filename are None: the message
    names the file and the system's reason)."""


class InternalError(Error):
    """A broken invariant inside svod (a bug)."""


class KernelFault(Error):
    """A CPU kernel faulted (SIGSEGV, SIGBUS, SIGFPE or SIGILL in its own code) and was stopped there:
    the launch, or the plan op and so the plan, failed; the process goes on. The message is the fault
    report; the same as attributes: `signal` (its number) and `signal_name`, `address` (None when the
    processor does not report it), `access` ("read", "write" or ""), `cause` ("null pointer", "stack
    overflow", "out of bounds", ...), `program` and `entry`, `slice` (the core_id slice, None for a
    launch of one), `op` and `op_label` (the plan op, None outside plans), `rank` (None without
    peers), `buffer`, `buffer_name` and `element` (the argument the address falls in or after, None
    when none), `in_called_function` (the fault was in a function the kernel called, e.g. memcpy)."""

    signal = 0
    signal_name = ""
    address = None
    access = ""
    cause = ""
    program = ""
    entry = ""
    slice = None
    op = None
    op_label = ""
    rank = None
    buffer = None
    buffer_name = ""
    element = None
    in_called_function = False


class SandboxViolation(Error):
    """A kernel run in svod's sandbox broke one of its rules (a refused system call, memory outside
    the plan's buffers, its wall-clock limit) or ended the helper process it ran in: the message names
    the op, the program and the rule. The helper is ended; the next run starts a fresh one."""


_ERRORS = {
    "validation": ValidationError,
    "compile": CompileError,
    "load": LoadError,
    "undefined symbol": UndefinedSymbolError,
    "unsupported": UnsupportedError,
    "device unavailable": DeviceUnavailableError,
    "execution": ExecutionError,
    "plan poisoned": PlanPoisonedError,
    "timeout": TimeoutError,
    "io": IoError,
    "internal": InternalError,
    "kernel fault": KernelFault,
    "sandbox violation": SandboxViolation,
}
for _kind, _cls in _ERRORS.items():
    _cls.kind = _kind
_svod._set_error_classes(Error, _ERRORS, ArgumentTypeError)


_checked_lock = _Lock()
_checked_open = []        # the mode of every open checked() block, in every thread
_checked_outside = "off"  # the mode before the first of them opened


def _checked_union():
    modes = [_checked_outside, *_checked_open]  # each as _check_mode() writes it
    return ",".join(m for m in modes if m != "off") or "off"


@_contextmanager
def checked(what="memory"):
    """Checked mode inside the block (as SVOD_CHECK): "memory" puts guard pages around every host buffer
    allocated in it, so a kernel's first access past either end raises svod.KernelFault naming the
    buffer and element, and poisons reused blocks; "nan" runs plans op by op and fails the first op whose
    outputs hold a NaN or Inf; "all" does both. The mode is process-wide: while blocks are open in
    several threads it is everything any of them asks for, and when the last one closes the mode from
    before the first returns."""
    global _checked_outside
    mode = _svod._check_mode_of(what)  # raises ArgumentTypeError or ValidationError naming the argument
    with _checked_lock:
        if not _checked_open:
            _checked_outside = _svod._check_mode()
        _checked_open.append(mode)
        try:
            _svod._set_check_mode(_checked_union())
        except BaseException:
            _checked_open.pop()
            raise
    try:
        yield
    finally:
        with _checked_lock:
            _checked_open.remove(mode)
            _svod._set_check_mode(_checked_union())


__all__ = [
    "Buffer", "BenchmarkResult", "Capture", "Device", "DeviceInfo", "Plan", "PlanBuilder", "Profile", "Program",
    "RoundRobinResult", "asbuffer", "benchmark", "benchmark_round_robin", "checked", "choose_variant", "comm",
    "cpu_recipe", "cpu_recipes", "device", "devices", "free_cached", "from_dlpack",
    "load_package", "load_plan", "profile", "program_binary_format", "time_limit",
    "Error", "ArgumentTypeError", *[c.__name__ for c in _ERRORS.values()],
]

# svod's log lines to the logging logger "svod" (opt-in; stderr by default).
from ._svod import flush_log, log_to_python  # noqa: E402

__all__ += ["flush_log", "log_to_python"]
