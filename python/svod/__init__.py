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

Errors are svod.Error subclasses, one per kind of failure (.kind names it).
"""

import contextlib as _contextlib
import functools as _functools

from . import _svod
from ._svod import (Buffer, BenchmarkResult, Capture, Device, DeviceInfo, Plan, PlanBuilder, Profile, Program,
                    device, devices, free_cached, from_dlpack, load_package, load_plan)

__version__ = _svod.__version__


class Error(Exception):
    """A failure svod diagnosed. `kind` names it ("validation", "compile", ...)."""

    kind = "internal"


class ValidationError(Error):
    """Bad arguments: counts, dtypes, sizes, bounds, names, layouts."""


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


class TimeoutError(Error):  # noqa: A001 - svod.TimeoutError, as the kind is named
    """A process or operation ran past its time limit."""


class IoError(Error):
    """Files, pipes or processes failed."""


class InternalError(Error):
    """A broken invariant inside svod (a bug)."""


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
}
for _kind, _cls in _ERRORS.items():
    _cls.kind = _kind
_svod._set_error_classes(Error, _ERRORS)


def _raising_validation_errors(fn):
    """`fn` with pybind11's TypeError for arguments of the wrong type raised as ValidationError,
    so that every bad argument is a svod.Error."""
    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            if "incompatible function arguments" not in str(e):
                raise
            raise ValidationError(str(e)) from None
    return wrapper


# Program.__call__ and Plan.execute, the per-call paths, check their arguments themselves.
for _cls, _names in ((Device, ("compile", "compile_many", "allocate", "capture")),
                     (Buffer, ("copy_from", "view", "__array__", "__dlpack__")),
                     (Plan, ("run", "bind", "rebind")), (Profile, ("table", "chrome_trace")), (Capture, ("variable", "slot")),
                     (PlanBuilder, ("add_buffer", "add_view", "add_variable", "run", "copy", "custom", "add_output"))):
    for _name in _names:
        setattr(_cls, _name, _raising_validation_errors(getattr(_cls, _name)))
device = _raising_validation_errors(device)
from_dlpack = _raising_validation_errors(from_dlpack)
load_plan = _raising_validation_errors(load_plan)
load_package = _raising_validation_errors(load_package)


def asbuffer(array):
    """A CPU svod.Buffer sharing a numpy array's memory (the array stays alive with it)."""
    return _svod._wrap_array(array)


def benchmark(target, args=(), warmup=1, runs=10, min_total=0.0, timeout=10.0):
    """Times a Program on `args` (buffers then scalars, as in a call), or a Plan's execute().

    Returns a BenchmarkResult: min, median, mean, stddev (nanoseconds), samples, runs.
    `min_total` (seconds) keeps timing up to `runs` runs; `timeout` (seconds) caps the whole.
    """
    if isinstance(target, Plan):
        if args:
            raise ValidationError("benchmark: a plan takes no args; bind arrays with plan.bind() first")
        return _raising_validation_errors(_svod._benchmark_plan)(target, warmup, runs, min_total, timeout)
    if not isinstance(target, Program):
        raise ValidationError(f"benchmark: expected a svod.Program or svod.Plan, got {type(target).__name__}")
    return _raising_validation_errors(_svod._benchmark_program)(target, list(args), warmup, runs, min_total, timeout)


@_contextlib.contextmanager
def profile():
    """Records every plan execution and program call inside the block.

        with svod.profile() as p:
            plan.execute()
        print(p.table())
        p.chrome_trace("trace.json")
    """
    p = Profile()
    p._start()
    try:
        yield p
    finally:
        p._stop()


__all__ = [
    "Buffer", "BenchmarkResult", "Capture", "Device", "DeviceInfo", "Plan", "PlanBuilder", "Profile", "Program",
    "asbuffer", "benchmark", "device", "devices", "free_cached", "from_dlpack", "load_package", "load_plan",
    "profile",
    "Error", *[c.__name__ for c in _ERRORS.values()],
]
