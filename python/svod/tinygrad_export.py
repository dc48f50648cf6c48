"""svod.tinygrad.export: a TinyJit function as one svod package, which runs without Python.

    jitted = TinyJit(model_step)
    svod.tinygrad.export(jitted, tokens, start_pos, path="step.svodpkg",
                         input_names=["tokens"], output_names=["next_token"])

The package holds the function's whole captured work in call order (the kernels of every batch
TinyJit made, those it runs one by one between batches, and copies) as one svod plan, recorded
with Device.capture from tinygrad's own calls: every kernel as the program binary tinygrad loaded
(object and source, nothing recompiled), the buffers it reads and never writes as constants (the
weights), those it reads and then writes as state (an LLM's KV cache, the random generator's
counter), the jitted function's Tensor arguments as inputs and its returned Tensors as outputs by
name, and tinygrad's Variables as plan variables with their ranges, under tinygrad's names. Work
the plan cannot express raises svod.UnsupportedError naming the call, never a package that would
need tinygrad.
"""

from __future__ import annotations

import re

from tinygrad import Tensor
from tinygrad.device import Buffer, MultiBuffer
from tinygrad.engine.jit import _TinyJit, _prepare_jit_inputs
from tinygrad.engine.realize import get_call_arg_uops, get_runtime, resolve_params
from tinygrad.tensor import all_tensors
from tinygrad.uop.ops import Ops, UOp, buffers

import svod
from svod import tinygrad as _backend

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def export(jitted: _TinyJit, *args, path, input_names=None, output_names=None, sign=None, **kwargs) -> None:
    """Writes the package of the TinyJit function `jitted` called with `args` and `kwargs` to `path`.

    A function not captured yet is called with them until TinyJit has captured it (its first call
    runs, its second captures). The inputs are its Tensor arguments in TinyJit's order (positional,
    then keyword by name), named `input_names` (default input0, input1, ...); the outputs its
    returned Tensors (one, or a tuple, list or dict of them, in order), named `output_names`
    (default output0, ...). tinygrad's Variables among the arguments (bound, as `v.bind(3)`) are plan
    variables of the same names with the Variable's range, set to the bound values. `sign=` a secret
    key file (svod pack --keygen) signs the package. Constants and state are stored as they are
    now: call this when the model's state is what a loaded package should start from.

    Raises svod.ValidationError for arguments the captured function was not captured with, or bad
    names; svod.UnsupportedError naming the call or tensor for work a plan cannot express: a kernel
    of another device than SVOD, a copy from one, a custom function in the jit cache, a launch size
    svod has no exact expression for, an input or output that is part of a larger buffer."""
    if not isinstance(jitted, _TinyJit):
        raise svod.ArgumentTypeError(f"svod.tinygrad.export: expected a TinyJit function, got {type(jitted).__name__}")
    for _ in range(2):
        if jitted.captured is not None: break
        jitted(*args, **kwargs)
    if jitted.captured is None:
        raise svod.UnsupportedError("svod.tinygrad.export: TinyJit did not capture the function (is JIT=0 set?)")
    captured = jitted.captured

    input_uops, var_vals, names, input_info = _prepare_jit_inputs(args, kwargs)
    if names != captured.expected_names or input_info != captured.expected_input_info:
        raise svod.ValidationError("svod.tinygrad.export: the arguments differ from those the function was captured "
                                   f"with (tensors {captured.expected_names}, got {names}; their dtypes, shapes and "
                                   "devices must match)")
    inputs = _input_tensors(args, kwargs)
    outputs = _returned_tensors(captured.ret)
    input_names = _port_names(input_names, "input", len(inputs))
    output_names = _port_names(output_names, "output", len(outputs))

    calls = list(_calls(captured.linear))
    variables = {v.expr: v for call in calls if call.src[0].op is Ops.PROGRAM for v in call.src[0].arg.vars
                 if v.expr != "core_id"}
    with _backend._CPU.capture() as g:
        plan_vars = {}
        for name, v in sorted(variables.items()):
            if not _NAME.match(name) or name in ("min", "max"):
                raise svod.UnsupportedError(f"svod.tinygrad.export: tinygrad's variable {name!r} is no svod variable name")
            plan_vars[name] = g.variable(name, int(var_vals.get(name, v.vmin)), min=int(v.vmin), max=int(v.vmax))
        written = {}  # id -> the base Buffers the calls write
        for index, call in enumerate(calls):
            for b in _record(call, index, input_uops, plan_vars): written[id(b)] = b

    in_ports = {}
    for name, t, u in zip(input_names, inputs, input_uops):
        in_ports[_slot(g, t, u, f"input {name!r}")] = _port(t, name, f"input {name!r}")
    out_ports = {}
    for name, t in zip(output_names, outputs):
        slot = _slot(g, t, t.uop.base, f"output {name!r}")
        if slot in in_ports: raise svod.UnsupportedError(f"svod.tinygrad.export: output {name!r} is an input")
        out_ports[slot] = _port(t, name, f"output {name!r}")
    # What tinygrad keeps between calls: the buffers of live tensors (weights, a KV cache, the random
    # generator's counter). Those the calls write are state, whatever part of them a call writes
    # (a kernel that stores one position of a cache declares the cache written, which alone would
    # make it scratch); every other buffer a call writes is tinygrad's intermediate, whose memory
    # its planner hands to other intermediates from call to call: scratch where the plan derives it.
    kept = _buffers_of_live_tensors()
    roles = {}
    for b in written.values():
        if id(b) in kept and (slot := g.slot(b._buf)) not in in_ports and slot not in out_ports: roles[slot] = "state"
    g.plan.pack(path, sign=sign, inputs=in_ports, outputs=out_ports, roles=roles, exporter="svod.tinygrad")


def _buffers_of_live_tensors() -> set[int]:
    """The ids of the base Buffers that live tensors hold (as TinyJit finds the buffers it must not plan)."""
    kept = set()
    for ref in list(all_tensors):
        if (t := ref()) is None: continue
        for u in t.uop.toposort():
            if u.op is Ops.BUFFER and (b := buffers.get(u)) is not None:
                for lane in (b.bufs if isinstance(b, MultiBuffer) else [b]): kept.add(id(lane._base or lane))
    return kept


def _calls(linear: UOp):
    """The captured function's calls in the order it runs them: a graph batch's calls in its place."""
    for call in linear.src:
        ast = call.src[0]
        if ast.op is Ops.CUSTOM_FUNCTION and ast.arg == "graph": yield from _calls(ast.src[0])
        else: yield call


def _call_name(call: UOp, index: int) -> str:
    ast = call.src[0]
    what = ast.arg.name if ast.op is Ops.PROGRAM else "copy" if ast.op is Ops.COPY else \
        f"custom function {ast.arg!r}" if ast.op is Ops.CUSTOM_FUNCTION else str(ast.op)
    return f"call {index} ({what})"


def _record(call: UOp, index: int, input_uops: list[UOp], plan_vars: dict[str, str]) -> list[Buffer]:
    """Records one call of the jit cache into the open capture, or raises UnsupportedError naming it.
    Returns the base Buffers the call writes."""
    ast, where = call.src[0], f"svod.tinygrad.export: {_call_name(call, index)}"
    if ast.op not in (Ops.PROGRAM, Ops.COPY):
        raise svod.UnsupportedError(f"{where}: a plan runs kernels and copies only, and tinygrad runs this itself")
    args = get_call_arg_uops(call)
    for b in args:
        if b.op is not Ops.PARAM and not _backend._input_view(b) and any(s.op is Ops.PARAM for s in b.toposort()):
            raise svod.UnsupportedError(f"{where}: it takes an input through a view that changes from call to call")
    bufs = [b.buffer for b in resolve_params(call, tuple(input_uops))]
    for b in bufs:
        if isinstance(b, MultiBuffer) or not b.device.startswith("SVOD"):
            raise svod.UnsupportedError(f"{where}: a buffer is on {b.device}; a plan holds SVOD buffers only")
    mems = [b.ensure_allocated()._buf for b in bufs]
    if ast.op is Ops.COPY:
        _backend._record_call(ast, mems, {}, None, plan_vars)
        return [bufs[0]._base or bufs[0]]
    runtime = get_runtime(bufs[0].device, ast)
    if not isinstance(runtime, _backend.SVODProgram):
        raise svod.UnsupportedError(f"{where}: the kernel is not an SVOD program ({type(runtime).__name__})")
    try:
        _backend._record_call(ast, mems, {}, runtime, plan_vars)
    except _backend.SizeExpressionError as e:
        raise svod.UnsupportedError(f"{where}: {e}") from None
    info = ast.arg
    return [bufs[i]._base or bufs[i] for i in info.globals if i in info.outs or i not in info.ins]


def _input_tensors(args, kwargs) -> list[Tensor]:
    """The jitted function's input tensors in TinyJit's order (as _prepare_jit_inputs finds them)."""
    tensors = [t for _, t in list(enumerate(args)) + sorted(kwargs.items()) if t.__class__ is Tensor]
    for x in args + tuple(kwargs.values()):
        it = x if isinstance(x, (tuple, list)) else x.values() if isinstance(x, dict) else []
        tensors += [t for t in it if t.__class__ is Tensor and not any(t is y for y in tensors)]
    return tensors


def _returned_tensors(ret) -> list[Tensor]:
    if isinstance(ret, Tensor): return [ret]
    items = ret.values() if isinstance(ret, dict) else ret if isinstance(ret, (tuple, list)) else None
    if items is None or not all(isinstance(t, Tensor) for t in items):
        raise svod.UnsupportedError("svod.tinygrad.export: the function must return a Tensor, or a tuple, list or "
                                    f"dict of Tensors, not {type(ret).__name__}")
    return list(items)


def _port_names(given, prefix: str, count: int) -> list[str]:
    if given is None: return [f"{prefix}{i}" for i in range(count)]
    given = list(given)
    if len(given) != count or not all(isinstance(n, str) and n for n in given):
        raise svod.ValidationError(f"svod.tinygrad.export: {prefix}_names: {count} names needed, got {given!r}")
    if len(set(given)) != count: raise svod.ValidationError(f"svod.tinygrad.export: {prefix}_names: {given!r} repeats a name")
    return given


def _slot(g, t: Tensor, base: UOp, what: str) -> int:
    """The plan slot of the buffer `t` is, which must be the whole of its tinygrad Buffer and that
    Buffer the whole of its svod storage."""
    buffer = base.buffer if base.op is Ops.BUFFER else None
    if not isinstance(buffer, Buffer) or not buffer.is_allocated():
        raise svod.UnsupportedError(f"svod.tinygrad.export: {what} is no realized SVOD buffer")
    shape = _shape(t, what)
    if buffer._base is not None or buffer.nbytes != _max_count(shape, t) * t.dtype.itemsize:
        raise svod.UnsupportedError(f"svod.tinygrad.export: {what} is part of a larger buffer ({buffer.nbytes} bytes); "
                                    "pass or return it .contiguous().realize()d")
    try:
        return g.slot(buffer._buf)
    except svod.ValidationError:
        raise svod.UnsupportedError(f"svod.tinygrad.export: {what}: no kernel of the function uses it") from None


def _shape(t: Tensor, what: str) -> list:
    """A tensor's shape for its port: sizes, and the names of the Variables its dimensions are."""
    out = []
    for d in t.shape:
        if isinstance(d, int): out.append(d)
        elif isinstance(d, UOp) and (v := d.src[0] if d.is_bound_var else d).is_variable: out.append(v.expr)
        else: raise svod.UnsupportedError(f"svod.tinygrad.export: {what}: dimension {d} is neither a size nor a Variable")
    return out


def _max_count(shape: list, t: Tensor) -> int:
    count = 1
    for d, s in zip(shape, t.shape):
        count *= d if isinstance(d, int) else int((s.src[0] if s.is_bound_var else s).vmax)
    return count


def _port(t: Tensor, name: str, what: str) -> dict:
    dtype = _backend._svod_dtype(t.dtype)
    if dtype is None: raise svod.UnsupportedError(f"svod.tinygrad.export: {what}: svod has no element type {t.dtype}")
    return {"name": name, "dtype": dtype, "shape": _shape(t, what)}
