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
  it without compiling (from the source only where the object does not suit this CPU);
- BEAM: tinygrad's search keeps its candidates and its choice, and svod compiles each round's
  candidates at once on its pool and times them in one round robin (tinygrad_search.py;
  SVOD_BEAM=0 gives tinygrad's own loop back);
- launching: a kernel is one svod.Program call, given tinygrad's global_size per call; svod
  runs its global_size[0] `core_id` slices on svod's thread pool;
- TinyJit: `SVODGraph` records each batch that TinyJit captures into one svod.Plan
  (`Device.capture`), then per call rebinds the jitted function's inputs and passes its
  symbolic variables; symbolic launch sizes become svod size expressions over them. What a
  plan cannot express (a launch size svod has no exact expression for, an input reached through
  a view that changes from call to call) is left to tinygrad, which runs those kernels one by one;
- export: `export(jitted, *args, path=...)` writes a TinyJit function's whole captured work as
  one svod package, which runs without Python (tinygrad_export.py).
"""

from __future__ import annotations

import platform
import re
import sys
import time

import numpy as np
from tinygrad.device import Allocator, BufferSpec, Compiled, Compiler, MultiBuffer, Program, TinyELF
from tinygrad.dtype import AddrSpace, dtypes
from tinygrad.engine.jit import MultiGraphRunner
from tinygrad.engine.realize import get_call_arg_uops
from tinygrad.helpers import all_int, prod
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.uop.ops import Ops, PatternMatcher, UOp, UPat

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
    """tinygrad's C renderer with svod as its compiler, and one change to what it writes: a vector
    built from elements and stored (`*((float4*)p) = (float4){a,b,c,d};`) is stored element by
    element (`*(p+0) = a; ...`). Each element is computed as before, so every output bit is the
    same. clang's SLP vectoriser takes its vector widths from the stores it starts at: float4
    stores keep a tile's multiply-adds in 4-wide vectors even where the tile is 16 or 32 columns
    wide, while element stores let it use the machine's widest (512 bits with AVX-512). A 480 x
    480 matmul tiled 16 columns by 4 rows ran in 1.77 ms instead of 3.40, tiled 32 by 5 in 0.95
    instead of 3.93 (bench/tinygrad_stores.py); PP-OCRv4 recognition after BEAM=2 in 15.2 ms
    instead of 25.5."""

    string_rewrite = PatternMatcher([
        # Not where the store reinterprets the buffer's type (tinygrad's rule casts the pointer).
        (UPat(Ops.STORE, src=(UPat.var("bidx"), UPat(Ops.STACK, name="value"))),
         lambda ctx, bidx, value: " ".join(f"*({ctx[bidx]}+{i}) = {ctx[v]};" for i, v in enumerate(value.src))
         if bidx.dtype == bidx.src[0].dtype else None),
    ]) + ClangRenderer.string_rewrite

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


def _buffer_param(index: int, dtype, shape: tuple, access: str = "readwrite") -> dict:
    """A kernel's buffer parameter for svod: its element type where svod has it (svod takes
    tinygrad's u8 memory for any type; fp8 stays untyped bytes) and its size, in elements of that
    type (in bytes when untyped)."""
    svod_dtype = _svod_dtype(dtype)
    param = {"name": f"data{index}", "access": access}
    if svod_dtype is not None: param["dtype"] = svod_dtype
    if all_int(shape): param["min_count"] = prod(shape) * (1 if svod_dtype is not None else dtype.itemsize)
    return param


def _parameters(signature: tuple, access: list[str] | None = None) -> dict:
    """A kernel's svod parameters (compile()'s buffers= and scalars=) from its tinygrad signature
    (TinyELF.signature: the buffers, whose shape is their elements, then the variables, shape ()):
    each buffer as _buffer_param makes it, with its entry of `access` (None: readwrite for all), and
    each variable an i32 or i64 scalar (core_id among them, which svod passes itself)."""
    buffers = [(dtype, shape) for _, _, dtype, shape in signature if shape != ()]
    return {"buffers": [_buffer_param(i, dtype, shape, "readwrite" if access is None else access[i])
                        for i, (dtype, shape) in enumerate(buffers)],
            "scalars": [{"name": name, "type": "i32" if dtype.itemsize <= 4 else "i64"}
                        for name, _, dtype, shape in signature if shape == ()]}


class SVODProgram(Program["SVODDevice"]):
    """One tinygrad kernel, loaded from the program binary SVODCompiler made (or given as the
    svod.Program `prg`, compiled already), called as tinygrad calls a runtime: prg(*buffers,
    global_size=, local_size=, vals=(one per variable, None for core_id))."""

    def __init__(self, dev: SVODDevice, obj: TinyELF, prg: svod.Program | None = None):
        self.dev, self.name, self.profile_key, self.obj = dev, obj.name, obj.profile_key, obj
        names = [name for name, _, _, shape in obj.signature if shape == ()]
        self.core_id = names.index("core_id") if "core_id" in names else None
        self.prg = self._load(None) if prg is None else prg
        self.recorded: dict[tuple, svod.Program] = {}

    def _load(self, access: list[str] | None) -> svod.Program:
        return _CPU.load_binary(self.obj.lib, entry=self.obj.name, name=self.obj.name,
                                **_parameters(self.obj.signature, access))

    def for_plan(self, info) -> svod.Program:
        """The kernel as plans record it: each buffer declared with the access tinygrad's
        ProgramInfo `info` gives it (read: only loaded; write: only stored, readwrite: both, or
        neither known), so that a plan runs kernels that only read a buffer side by side, and a
        saved plan tells the weights (never written) from what the kernels compute."""
        outs, ins = set(info.outs), set(info.ins)
        access = tuple("readwrite" if (s in outs) == (s in ins) else "write" if s in outs else "read"
                       for s in info.globals)
        if (prg := self.recorded.get(access)) is None: prg = self.recorded[access] = self._load(list(access))
        return prg

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


# tinygrad's integer operations on launch sizes and svod's spelling of each, where svod's operation
# is the same function of the same values: C's truncating division and remainder (tinygrad's CDIV and
# CMOD), max, and the rest as in C. Floor division and modulo (FLOORDIV, FLOORMOD) by a positive
# divisor and shifts by constants are spelled with these; anything else (comparisons, WHERE, bitwise
# operations) has no svod spelling.
_SIZE_OPERATORS = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.CDIV: "/", Ops.CMOD: "%"}


class SizeExpressionError(svod.UnsupportedError):
    """A tinygrad launch size that no svod size expression computes exactly."""


def _size_expr(u, names: dict[str, str]) -> int | str:
    """tinygrad's launch size `u` (an int, or a UOp over its Variables) as an svod size expression
    over plan variables, `names` mapping tinygrad's variable names to them: an int where it is one,
    else a text that svod evaluates to what tinygrad's sym_infer gives for every value of the
    variables within their ranges. Raises SizeExpressionError naming what has no exact spelling.

    tinygrad divides by zero as 0 where svod refuses, so a divisor must be known to be positive."""
    if isinstance(u, int): return u
    if not isinstance(u, UOp): raise SizeExpressionError(f"launch size {u!r} is not an integer")

    def render(x: UOp) -> str:
        if x.op is Ops.CONST:
            if not isinstance(x.arg, int): raise SizeExpressionError(f"launch size {u.render()}: constant {x.arg!r}")
            return str(x.arg)
        if x.op in (Ops.PARAM, Ops.BUFFER) and (x.is_variable or getattr(x.arg, "addrspace", None) is AddrSpace.ALU):
            if x.expr not in names: raise SizeExpressionError(f"launch size {u.render()}: variable {x.expr} is not in the plan")
            return names[x.expr]
        if x.op is Ops.CAST and dtypes.is_int(x.dtype) and dtypes.is_int(x.src[0].dtype): return render(x.src[0])
        if x.op is Ops.NEG: return f"(-{render(x.src[0])})"
        if x.op is Ops.MAX: return f"max({render(x.src[0])}, {render(x.src[1])})"
        if x.op in _SIZE_OPERATORS:
            if x.op in (Ops.CDIV, Ops.CMOD) and x.src[1].vmin <= 0: raise SizeExpressionError(
                f"launch size {u.render()}: divisor {x.src[1].render()} may be {x.src[1].vmin}")
            return f"({render(x.src[0])} {_SIZE_OPERATORS[x.op]} {render(x.src[1])})"
        if x.op in (Ops.FLOORDIV, Ops.FLOORMOD) and x.src[1].vmin > 0:
            a, b = render(x.src[0]), render(x.src[1])
            if x.src[0].vmin >= 0: return f"({a} / {b})" if x.op is Ops.FLOORDIV else f"({a} % {b})"
            # A dividend that may be negative: with b > 0, floor mod is ((a % b) + b) % b, and a less
            # it divides exactly.
            mod = f"((({a} % {b}) + {b}) % {b})"
            return f"(({a} - {mod}) / {b})" if x.op is Ops.FLOORDIV else mod
        if x.op in (Ops.SHL, Ops.SHR) and x.src[1].op is Ops.CONST and 0 <= x.src[1].arg < 63 and \
                (x.op is Ops.SHL or x.src[0].vmin >= 0):
            return f"({render(x.src[0])} {'*' if x.op is Ops.SHL else '/'} {1 << x.src[1].arg})"
        raise SizeExpressionError(f"launch size {u.render()}: svod has no exact spelling of {x.op}")

    return render(u)


def _launch_sizes(info, names: dict[str, str]) -> list:
    """A kernel's global size as svod takes it: ints, and expressions over plan variables (_size_expr)."""
    return [_size_expr(s, names) for s in info.global_size]


def _record_call(ast: UOp, mems: list, device_vars: dict[str, int], runtime, names: dict[str, str]):
    """Records one call of a TinyJit batch into the capture open on this thread: a COPY as a svod
    copy, a PROGRAM as its SVODProgram's call with its arguments' svod buffers `mems` (every argument
    of the call, in order), its scalars (a device's own value, else the plan variable that `names`
    gives tinygrad's variable) and its launch sizes (_launch_sizes)."""
    if ast.op is Ops.COPY:
        mems[0].copy_from(mems[1])
        return
    scalars = [device_vars.get(v.expr, names.get(v.expr)) for v in ast.arg.vars]
    runtime.for_plan(ast.arg)(*[mems[i] for i in ast.arg.globals], *runtime.scalar_args(tuple(scalars)),
                              global_size=_launch_sizes(ast.arg, {**names, **{k: str(v) for k, v in device_vars.items()}}))


def _input_view(b: UOp) -> bool:
    """Whether a call's argument is a fixed part of a jitted function's input (a SHRINK of a PARAM
    by constants): a view of the input's slot in a plan, which follows the input when it is rebound."""
    return b.op is Ops.SHRINK and b.src[0].op is Ops.PARAM and all(s.op is Ops.CONST for s in b.src[1:])


def _input_slots(call: UOp) -> list[int]:
    """The jitted function's inputs (their PARAM slots) that a call reads or writes, directly or
    through a view (_input_view)."""
    return [b.arg.slot if b.op is Ops.PARAM else b.src[0].arg.slot
            for b in get_call_arg_uops(call) if b.op is Ops.PARAM or _input_view(b)]


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
    a view of it, so svod orders the ops by the bytes they touch (each kernel declaring which of
    its buffers it reads and writes, SVODProgram.for_plan). The jitted function's inputs are
    rebound (no copy) on every call, and the fixed parts of them that kernels take (views) follow;
    tinygrad's symbolic variables are plan variables, passed to the kernels as expressions, and
    symbolic launch sizes are expressions over them (_size_expr). With SVOD_VARIANTS=1 the plan runs
    each kernel's exact variant chosen by measurement (Plan.choose_variants); SVOD_VARIANTS_TOLERANCE
    lets inexact ones compete within its tolerance."""

    @staticmethod
    def supports_uop(batch_devs, new_call: UOp) -> bool:
        if not MultiGraphRunner.supports_uop(batch_devs, new_call): return False
        # An input reached through another view (an MSELECT, a SHRINK by variables) is not a fixed
        # part of the input's slot.
        for b in get_call_arg_uops(new_call):
            if b.op is not Ops.PARAM and not _input_view(b) and any(s.op is Ops.PARAM for s in b.toposort()): return False
        ast = new_call.src[0]
        if ast.op is Ops.COPY: return True
        try:
            _launch_sizes(ast.arg, {v.expr: v.expr for v in ast.arg.vars})
        except SizeExpressionError:
            return False
        return True

    def __init__(self, linear: UOp, input_uops: tuple[UOp, ...] = ()):
        super().__init__(linear, input_uops)
        variables = {v.expr: v for _, ast, _, _ in self.calls if ast.op is Ops.PROGRAM for v in ast.arg.vars}
        with _CPU.capture() as g:
            self.var_names = {v: g.variable(f"v{i}", int(variables[v].vmin), min=int(variables[v].vmin),
                                            max=int(variables[v].vmax)) for i, v in enumerate(self.vars)}
            for (_, ast, bufs, device_vars), runtime in zip(self.calls, self.runtimes):
                _record_call(ast, [b._buf for b in bufs], device_vars, runtime, self.var_names)
        self.plan = g.plan
        # SVOD_VARIANTS=1: each kernel runs the variant measured fastest for it (cached across
        # processes), chosen now on the buffers the recording call left; exact recipes only unless
        # SVOD_VARIANTS_TOLERANCE gives a tolerance, which turns variants on by itself.
        tolerance = svod._svod._variants_tolerance_from_env()
        if svod._svod._env_switch("SVOD_VARIANTS", tolerance is not None): self.plan.choose_variants(tolerance)
        # Each input's slot is the storage it is bound to; the views of it that kernels take follow it.
        self.inputs = []
        for idx in dict.fromkeys(idx for call in self.linear.src for idx in _input_slots(call)):
            b = input_uops[idx].buffer
            for dev_idx, lane in enumerate(b.bufs if isinstance(b, MultiBuffer) else [b]):
                self.inputs.append(_Input(g.slot(lane._buf), idx, dev_idx, input_uops[idx], lane))

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


from svod.tinygrad_export import export  # noqa: E402  (it uses this module's classes)
import svod.tinygrad_search  # noqa: E402,F401  (BEAM on svod: it uses this module's classes)
