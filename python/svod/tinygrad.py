"""tinygrad on svod: the device `SVOD` for tinygrad (https://github.com/tinygrad/tinygrad).

    import svod.tinygrad          # registers the device; then DEV=SVOD (or device="SVOD")
    from tinygrad import Tensor
    print((Tensor.ones(4, device="SVOD") * 2).tolist())

Importing this module makes `tinygrad.runtime.ops_svod` resolve to it, which is how tinygrad
finds a device named SVOD; nothing in tinygrad is edited. An installed svod needs no import:
the svod_tinygrad.pth file installed beside the package loads this module when tinygrad asks
for that name (_svod_tinygrad_hook.py). The device renders kernels with
tinygrad's C renderer (ClangRenderer, threads through its `core_id` parameter), keeps memory in
svod buffers, and compiles and launches kernels through svod:

- memory: every tinygrad allocation is one untyped (u8) svod buffer from svod's caching
  allocator, and tinygrad's sub-buffers are svod views of it; host memory of the caller's
  (`Tensor.from_blob`, tinygrad's external_ptr) is wrapped in place (svod.asbuffer);
- compiling: tinygrad's compile step (`SVODCompiler`) compiles with svod's in-process compiler
  and returns a svod program binary (the object, the compiler it came from, the source), which
  tinygrad keeps in its own disk cache, so a later process compiles nothing; `SVODProgram` loads
  it without compiling (from the source only where the object does not suit this CPU). tinygrad
  compiles where it renders: BEAM search's candidates in its worker processes, in parallel;
- launching: a kernel is one svod.Program call, given tinygrad's global_size per call; svod
  runs its global_size[0] `core_id` slices on svod's thread pool;
- TinyJit: `SVODGraph` records each batch that TinyJit captures into one svod.Plan
  (`Device.capture`), then per call rebinds the jitted function's inputs and passes its
  symbolic variables. What a plan cannot express (symbolic launch sizes, an input reached
  through a view) is left to tinygrad, which runs those kernels one by one.
"""

from __future__ import annotations

import platform
import re
import sys
import time

import numpy as np
from tinygrad.device import Allocator, BufferSpec, Compiled, Compiler, MultiBuffer, Program, TinyELF
from tinygrad.dtype import dtypes
from tinygrad.engine.jit import MultiGraphRunner
from tinygrad.engine.realize import get_call_arg_uops
from tinygrad.helpers import all_int, prod
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.uop.ops import Ops, UOp

import svod

# tinygrad opens device X by importing tinygrad.runtime.ops_x.
sys.modules.setdefault("tinygrad.runtime.ops_svod", sys.modules[__name__])

_CPU = svod.device("CPU")


def _external_buffer(address: int, size: int) -> svod.Buffer:
    """A u8 svod buffer over `size` bytes of host memory at `address` that the caller owns and
    keeps alive (tinygrad's external_ptr, as Tensor.from_blob gives it): the memory is wrapped as
    a numpy array (svod.asbuffer), never copied, so kernels read and write it in place.

    Errors are ValueError, which tinygrad's allocator passes on as they are (it turns a
    RuntimeError, NotImplementedError included, into "MemoryError: Allocation of N B failed")."""
    if not isinstance(address, int) or address <= 0:
        raise ValueError(f"SVOD: external memory must be a nonzero host address, got {address!r}")
    import ctypes
    array = np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(address))
    return svod.asbuffer(array)


class SVODAllocator(Allocator["SVODDevice"]):
    """tinygrad's allocations as svod buffers (u8). svod's allocator keeps freed blocks for reuse,
    so this one caches nothing itself."""

    def _alloc(self, size: int, options: BufferSpec) -> svod.Buffer:
        if options.external_ptr is not None:  # Tensor.from_blob: host memory the caller owns
            return _external_buffer(options.external_ptr, size)
        return _CPU.allocate("u8", size, zero=options.zero)

    def _as_buffer(self, src: svod.Buffer) -> memoryview:
        return memoryview(src.numpy())

    def _copyin(self, dest: svod.Buffer, src: memoryview):
        dest.copy_from(np.frombuffer(src, dtype=np.uint8))

    def _copyout(self, dest: memoryview, src: svod.Buffer):
        np.frombuffer(dest, dtype=np.uint8)[:] = src.numpy()

    def _offset(self, buf: svod.Buffer, size: int, offset: int) -> svod.Buffer:
        return buf.view(offset, size, "u8")


# The kernel a ClangRenderer source defines: the last `void name(` at the start of a line (the
# renderer writes the kernel after anything it puts before it).
_KERNEL_NAME = re.compile(r"^void\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)


class SVODCompiler(Compiler):
    """tinygrad's compile step by svod: C source to a svod program binary (bytes), through svod's
    kernel and object caches. tinygrad's compile cache (CCACHE, on by default) keeps the binaries
    under the key compile_svod_<svod version>_<program binary format>_<CPU recipe>, so that
    binaries an earlier svod made, which this one would refuse or would build otherwise, are not
    found there."""

    def __init__(self):
        super().__init__(f"compile_svod_{svod.__version__}_{svod.program_binary_format}_{svod.cpu_recipe}")

    def compile(self, src: str) -> bytes:
        names = _KERNEL_NAME.findall(src)
        if not names: raise svod.ValidationError("SVOD: the kernel source defines no `void name(...)` function")
        return _CPU.compile_binary(source=src, entry=names[-1])


class SVODRenderer(ClangRenderer):
    """tinygrad's C renderer with svod as its compiler."""

    def __init__(self, target):
        super().__init__(target)
        self.compiler = SVODCompiler()


def _svod_dtype(dtype) -> str | None:
    """svod's element type for a tinygrad buffer's dtype, or None where svod has none (fp8).

    Not through tinygrad's _to_np_dtype: that gives float32 for bfloat16 and the fp8 types (the
    numpy type tinygrad converts their values to), four bytes an element where the memory holds
    two or one."""
    if dtype == dtypes.bfloat16: return "bf16"
    return None if dtype.fmt is None else np.dtype(dtype.fmt).name  # struct's codes: '?', 'b' ... 'e', 'f', 'd'


def _buffer_param(index: int, dtype, shape: tuple) -> dict:
    """A kernel's buffer parameter for svod: its element type where svod has it (svod takes
    tinygrad's u8 memory for any type; fp8 stays untyped bytes) and its size, in elements of that
    type (in bytes when untyped)."""
    svod_dtype = _svod_dtype(dtype)
    param = {"name": f"data{index}", "access": "readwrite"}
    if svod_dtype is not None: param["dtype"] = svod_dtype
    if all_int(shape): param["min_count"] = prod(shape) * (1 if svod_dtype is not None else dtype.itemsize)
    return param


class SVODProgram(Program["SVODDevice"]):
    """One tinygrad kernel, loaded from the program binary SVODCompiler made, called as tinygrad
    calls a runtime: prg(*buffers, global_size=, local_size=, vals=(one per variable, None for
    core_id))."""

    def __init__(self, dev: SVODDevice, obj: TinyELF):
        self.dev, self.name, self.profile_key = dev, obj.name, obj.profile_key
        # The signature lists the buffer parameters (shape: their elements), then the variables
        # (shape ()).
        buffers = [(dtype, shape) for _, _, dtype, shape in obj.signature if shape != ()]
        variables = [(name, dtype) for name, _, dtype, shape in obj.signature if shape == ()]
        names = [name for name, _ in variables]
        self.core_id = names.index("core_id") if "core_id" in names else None
        self.prg = _CPU.load_binary(obj.lib, entry=obj.name, name=obj.name,
                                    buffers=[_buffer_param(i, dtype, shape) for i, (dtype, shape) in enumerate(buffers)],
                                    scalars=[{"name": name, "type": "i32" if dtype.itemsize <= 4 else "i64"}
                                             for name, dtype in variables])

    def scalar_args(self, vals: tuple) -> tuple:
        """tinygrad's vals without core_id's place (svod passes core_id itself)."""
        return vals if self.core_id is None else vals[:self.core_id] + vals[self.core_id + 1:]

    def __call__(self, *bufs, global_size=(1, 1, 1), local_size=None, vals=(), wait=False, timeout=None, **kw):
        start = time.perf_counter()
        try:
            if timeout:  # in ms, as tinygrad gives it (BEAM's per-candidate limit); 0 and None: no limit
                with svod.time_limit(timeout / 1e3):
                    self.prg(*bufs, *self.scalar_args(vals), global_size=global_size)
            else:
                self.prg(*bufs, *self.scalar_args(vals), global_size=global_size)
        except _LAUNCH_FAILURES as e:
            raise _runtime_error(e) from None
        return time.perf_counter() - start if wait else None


# A kernel that faults, is stopped or fails as it runs: what tinygrad expects of a device's failed
# launch is a RuntimeError (BEAM search records such a candidate as failed and goes on).
_LAUNCH_FAILURES = (svod.KernelFault, svod.ExecutionError, svod.TimeoutError)
_RUNTIME_ERRORS: dict[type, type] = {}


def _runtime_error(e: svod.Error) -> Exception:
    """`e` as an instance of a class that is both its own class and RuntimeError, with its fields."""
    cls = type(e)
    if cls not in _RUNTIME_ERRORS:
        _RUNTIME_ERRORS[cls] = type(cls.__name__, (cls, RuntimeError), {"__module__": cls.__module__})
    error = _RUNTIME_ERRORS[cls](*e.args)
    error.__dict__.update(e.__dict__)
    return error.with_traceback(e.__traceback__)


class _Input:
    """An input of a jitted function as its plan sees it: the plan slot, and what is bound there."""
    __slots__ = ("slot", "index", "device", "uop", "buffer", "mem")

    def __init__(self, slot, index: int, device: int, uop: UOp, buffer):
        self.slot, self.index, self.device = slot, index, device
        self.uop, self.buffer, self.mem = uop, buffer, buffer._buf

    def changed(self, input_uops: tuple[UOp, ...]) -> bool:
        """Whether this call's input is other memory than the bound one (then it becomes the bound one)."""
        if (u := input_uops[self.index]) is not self.uop:  # a UOp keeps its Buffer while it lives
            b = u.buffer
            self.uop, self.buffer = u, b.bufs[self.device] if isinstance(b, MultiBuffer) else b
        if self.buffer._buf is self.mem: return False
        self.mem = self.buffer._buf
        return True


class SVODGraph(MultiGraphRunner):
    """A TinyJit batch of SVOD kernels and copies, replayed as one svod.Plan.

    The batch is recorded with svod's capture: each svod storage becomes a plan slot and each view
    a view of it, so svod orders the ops by the bytes they touch. The jitted function's inputs are
    rebound (no copy) on every call; tinygrad's symbolic variables are plan variables, passed to
    the kernels as expressions. With SVOD_VARIANTS=1 the plan runs each kernel's exact variant
    chosen by measurement (Plan.choose_variants)."""

    @staticmethod
    def supports_uop(batch_devs, new_call: UOp) -> bool:
        if not MultiGraphRunner.supports_uop(batch_devs, new_call): return False
        # An input reached through a view (a SHRINK or MSELECT of a PARAM) cannot be rebound.
        for b in get_call_arg_uops(new_call):
            if b.op is not Ops.PARAM and any(s.op is Ops.PARAM for s in b.toposort()): return False
        ast = new_call.src[0]
        return ast.op is Ops.COPY or all_int(ast.arg.global_size)

    def __init__(self, linear: UOp, input_uops: tuple[UOp, ...] = ()):
        super().__init__(linear, input_uops)
        variables = {v.expr: v for _, ast, _, _ in self.calls if ast.op is Ops.PROGRAM for v in ast.arg.vars}
        with _CPU.capture() as g:
            self.var_names = {v: g.variable(f"v{i}", int(variables[v].vmin), min=int(variables[v].vmin),
                                            max=int(variables[v].vmax)) for i, v in enumerate(self.vars)}
            for (_, ast, bufs, device_vars), runtime in zip(self.calls, self.runtimes):
                mems = [b._buf for b in bufs]
                if ast.op is Ops.COPY:
                    mems[0].copy_from(mems[1])
                    continue
                scalars = [device_vars.get(v.expr, self.var_names.get(v.expr)) for v in ast.arg.vars]
                runtime.prg(*[mems[i] for i in ast.arg.globals], *runtime.scalar_args(tuple(scalars)),
                            global_size=ast.arg.launch_dims({})[0])
        self.plan = g.plan
        # SVOD_VARIANTS=1: each kernel runs the exact variant measured fastest for it (cached
        # across processes), chosen now on the buffers the recording call left.
        if svod._svod._variants_switch(): self.plan.choose_variants()
        self.inputs = list({(idx, dev_idx): _Input(g.slot(bufs[pos]._buf), idx, dev_idx, input_uops[idx], bufs[pos])
                            for j, (dev_idx, _, bufs, _) in enumerate(self.calls)
                            for pos, idx in self.uop_replace[j]}.values())

    def __call__(self, input_uops: tuple[UOp, ...], var_vals: dict[str, int], wait=False) -> float | None:
        for i in self.inputs:
            if i.changed(input_uops): self.plan.rebind(i.slot, i.mem)
        start = time.perf_counter()
        try:
            self.plan.execute(vars={name: var_vals[v] for v, name in self.var_names.items()} if self.var_names else None)
        except _LAUNCH_FAILURES as e:
            raise _runtime_error(e) from None
        return time.perf_counter() - start if wait else None


class SVODDevice(Compiled):
    """tinygrad's device SVOD: svod's CPU device, memory, compiler and plans."""

    def __init__(self, device: str = ""):
        arch = {"amd64": "x86_64", "aarch64": "arm64"}.get(m := platform.machine().lower(), m) + ",native"
        super().__init__(device, SVODAllocator(self), [SVODRenderer], SVODProgram, graph=SVODGraph, arch=arch)
