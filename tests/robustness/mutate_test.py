#!/usr/bin/env python3
"""Mutation campaign for `svod run` (issue 24): svod's own robustness.

The real plans (examples/*/plan.json, tests/planfile/data/*.json) and packages
made from them with `svod pack` are mutated, deterministically from a seed,
and each mutant runs through `svod run` in a subprocess with a time limit
(--timeout, and a kill at twice that), a scratch object cache and, unless svod
is built with a sanitizer, a 6 GiB address-space limit. Plans get
structure-aware JSON mutations (keys deleted, duplicated or renamed, numbers
made huge, negative, zero, fractional or strings, ops swapped, reversed or
duplicated, buffers renamed in one place, dtypes, counts, shapes, views,
inits, variables, launch sizes, op scalars and buffers, `after`, copies,
custom functions, collectives, outputs, devices, languages, entries, defines,
sources broken syntactically, nesting made deep, thousands of extra buffers
or ops) and byte-level ones on their text, and some are packed by `svod pack`
first; packages get byte-level mutations (flipped, inserted, deleted bytes,
truncation, a fake signature block), header and section-table edits with the
digests made to match, and section edits (manifest, plan, ELF headers,
symbols and relocations of the objects, buffer data, expected values) written
back into consistent containers. Flags (--var, --ranks, --sequential,
--repeat, --cpu-compiler) and SVOD_THREADS, SVOD_CHECK=memory and SVOD_COMPILE=0
vary too. Kernel sources and defines keep their meaning (they are left
intact or broken syntactically): the campaign tests svod, not the kernels.

Every run is classified:

  ran        exit 0, every declared output printed and every expectation
             checked ("expect: ok")
  mismatch   exit 1, an expectation failed, said on stdout and stderr
  rejected   exit 2 with one "svod run: error (kind): message" line per
             rank (plus "  | " continuation lines) on stderr
  kernel     a kernel's own fault, exit() or endless loop, which svod named
             (its fault report, --timeout naming a running kernel op, or the
             canary of a buffer's alignment slack when it is freed):
             the kernel trusted sizes the mutation changed. A crash svod
             did not name is run again under SVOD_CHECK=memory, and counts
             here when the guard pages then catch a kernel past a buffer.
  FAIL-*     anything else: a signal or sanitizer report svod did not
             attribute to a kernel (crash, sanitizer), no exit (hang; or
             --timeout outside kernels), stderr that is not a clean error
             (noise), an "internal" error, exit 0 without the outputs
             (silent), exit 0 when a tampered expectation must fail or a
             malformed package must be refused, other results after a
             mutation that changes nothing -- keys reordered, names renamed
             everywhere, strings written with escapes, sections reordered,
             --sequential, --repeat -- (wrong), or text or a package that
             the format forbids run anyway (lenient)

A failure's input is kept (--keep, default WORK/failures) with a line in
failures.txt (the mutation, the class, the command, the status and stderr)
and, when the run needs them, NAME.args (flags, environment, oracle); every
run's result is a line of WORK/results.jsonl. Kept inputs found earlier
(--replay DIR, e.g. fuzz/regressions/svod_run) run first and must not fail.
The exit status is 0 when nothing failed, 1 otherwise.

    mutate_test.py --svod build/release/svod [--plans 100] [--packages 100]
                   [--seed 1] [--jobs 2] [--timeout 10] [--work DIR]
                   [--keep DIR] [--replay DIR] [--only plan:17 [--show]]

scripts/mutate.sh runs the full campaign (500 + 500 by default). Needs only
Python 3's standard library and libxxhash (the package digests), which svod's
build needs for its header (scripts/install-deps.sh installs libxxhash-dev).
"""

import argparse
import ctypes
import ctypes.util
import json
import os
import pathlib
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = pathlib.Path(__file__).resolve().parents[2]
PLAN_GLOBS = ["examples/*/plan.json", "tests/planfile/data/*.json"]

# ---------------------------------------------------------------------------
# JSON that keeps what mutations need: key order, duplicate keys, and number
# texts Python's json module cannot write.


class Obj(list):
    """A JSON object as its [key, value] pairs, in order, duplicates allowed."""

    def get(self, key, default=None):
        for k, v in reversed(self):
            if k == key:
                return v
        return default

    def keys(self):
        return [k for k, _ in self]

    def set(self, key, value):
        for pair in self:
            if pair[0] == key:
                pair[1] = value
                return
        self.append([key, value])

    def remove(self, key):
        self[:] = [p for p in self if p[0] != key]


class Raw(str):
    """Text written into the JSON as it is (1e999, -0, 1.0, NaN, 0x10)."""


def parse_json(text):
    """The document, or ValueError (deep nesting too: Python's parser recurses)."""
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: Obj([list(p) for p in pairs]))
    except RecursionError:
        raise ValueError("nested too deep for Python's json") from None


def dump(node, indent=None, escape=None, level=0):
    """JSON text of `node`. `escape(s)` may write a string its own way."""
    pad = "" if indent is None else "\n" + " " * (indent * (level + 1))
    end = "" if indent is None else "\n" + " " * (indent * level)
    sep = ", " if indent is None else ","
    if isinstance(node, Raw):
        return str(node)
    if isinstance(node, Obj):
        if not node:
            return "{}"
        items = [pad + dump_string(k, escape) + ": " + dump(v, indent, escape, level + 1) for k, v in node]
        return "{" + sep.join(items) + end + "}"
    if isinstance(node, list):
        if not node:
            return "[]"
        return "[" + sep.join(pad + dump(v, indent, escape, level + 1) for v in node) + end + "]"
    if isinstance(node, str):
        return dump_string(node, escape)
    if isinstance(node, float) and (node != node or node in (float("inf"), float("-inf"))):
        return "1e999" if node > 0 else "-1e999" if node < 0 else "0"
    return json.dumps(node)


def dump_string(s, escape):
    return escape(s) if escape else json.dumps(s, ensure_ascii=False)


def walk(node, path=()):
    """Every (container, key or index, value, path) below `node`."""
    if isinstance(node, Obj):
        for i, (k, v) in enumerate(node):
            yield node, i, v, path + (k,)
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield node, i, v, path + (i,)
            yield from walk(v, path + (i,))


def put(container, index, value):
    if isinstance(container, Obj):
        container[index][1] = value
    else:
        container[index] = value


def deep(count, kind):
    """Text nested `count` deep (arrays or objects), as a Raw node."""
    if kind == "[":
        return Raw("[" * count + "1" + "]" * count)
    return Raw('{"a": ' * count + "1" + "}" * count)


# ---------------------------------------------------------------------------
# Values the mutations choose from.

HUGE_INTS = [2**31 - 1, 2**31, -2**31, -2**31 - 1, 2**32, 2**53 + 1, 2**62, 2**63 - 1, 2**63, -2**63, -2**63 - 1,
             2**64 - 1, 2**64, 10**30, -10**30]
SMALL_INTS = [0, -1, 1, 2, 3, 7, 64, 255, 256, 257, 1023, 4096, 65536, -65536]
FLOATS = [0.5, 1.5, -0.5, 1e-300, 1e300, -1e300, 3.14159, 2.0]
RAW_NUMBERS = ["1e999", "-1e999", "-0", "1.0", "4.0", "1e2", "0.0", "-0.0", "1E400", "5e-324",
               "123456789012345678901234567890"]
BAD_RAW = ["NaN", "Infinity", "-Infinity", "0x10", "01", "+1", ".5", "1.", "1e", "--1", "nan"]
STRINGS = ["", " ", "0", "-1", "1e9", "N", "min", "max", "rank", "world_size", "core_id", "NaN", "null", "true",
           "\u00e9\u4e2d\U0001f600", "\x00", "a\x00b", "\n", "\t\r", "\\", '"', "%s%n%x{}{0}", "${HOME}", "a" * 300,
           "x" * 100000, "../" * 30 + "etc/passwd", "/dev/null", "/dev/zero", "/dev/urandom", "/proc/self/status",
           "/etc/hostname", "/", "/tmp", "/nonexistent/x", "fifo", "loop", "dir", "empty.npy", "link_x.npy", "CPU",
           "CL:0", "CUDA:0", "\ud800"]
DTYPES = ["bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16", "f32", "f64", "float32",
          "int64", "float16", "uint8", "f128", "F32", "float", "complex64", "", "u1", "i4", "bool_", "object"]
DEVICES = ["CPU", "CL:0", "CL:1", "CL:-1", "CL:99999999999999999999", "CUDA:0", "cpu", "CPU:0", "CPU:1", "", "CL",
           "CL:", "GPU", "CL:0 ", "NULL:0", "ÇPU"]
LANGUAGES = ["c", "llvm", "opencl", "cuda", "C", "c++", "", "asm", "ptx"]
# Entries that name something other than a kernel: the entry must be the
# object's own definition, never a symbol resolved elsewhere.
ENTRIES = ["", "main", "abort", "exit", "_exit", "free", "malloc", "memset", "printf", "_start", "__libc_start_main",
           "svod_nonexistent", "entry point", "k\x00", "0x401000", "linear.c"]
EXPRESSIONS = ["N*N*N*N*N*N*N*N*N*N*N*N*N*N*N*N*N*N*N*N", "1/0", "N%0", "(N", "N)", "N+", "-N", "0", "-1",
               "9223372036854775807", "9223372036854775807+1", "-9223372036854775808", "-9223372036854775808/-1",
               "min(N)", "max(N,N,N)", "unknown", "core_id", "rank", "world_size", "N***2", "N/ /2", "2147483648",
               "4294967297", "1e3", "N - N", "abs(N)", "N ? 1 : 2", "N<<40", "(" * 300 + "1" + ")" * 300, "min",
               "max(rank, world_size)", "\u00e9", "1" * 400]
ACCESS = ["read", "write", "readwrite", "Write", "", "rw", "none"]


def interesting_number(rng):
    r = rng.random()
    if r < 0.35:
        return rng.choice(HUGE_INTS)
    if r < 0.6:
        return rng.choice(SMALL_INTS)
    if r < 0.75:
        return rng.choice(FLOATS)
    if r < 0.9:
        return Raw(rng.choice(RAW_NUMBERS))
    return rng.choice([True, False, None, "1", "", [], Obj(), [1], Obj([["a", 1]])])


def interesting_string(rng, ctx):
    r = rng.random()
    if r < 0.5:
        return rng.choice(STRINGS)
    if r < 0.8 and ctx["names"]:
        return rng.choice(ctx["names"])
    if r < 0.9:
        return rng.choice(EXPRESSIONS)
    return rng.choice([0, -1, 2**63, None, True, [], Obj(), ["a"]])


def any_value(rng, ctx):
    r = rng.random()
    if r < 0.4:
        return interesting_number(rng)
    if r < 0.8:
        return interesting_string(rng, ctx)
    if r < 0.9:
        return deep(rng.choice([255, 256, 257, 100000]), rng.choice("[{"))
    return rng.choice([None, [], Obj(), [None], Obj([["", None]])])


# ---------------------------------------------------------------------------
# Plan mutations: each takes (rng, doc, ctx), changes doc in place and says
# what it did, or returns None when it does not apply to this plan.


def section(doc, key):
    value = doc.get(key) if isinstance(doc, Obj) else None
    return value if isinstance(value, Obj) else Obj()


def ops_of(doc):
    ops = doc.get("ops") if isinstance(doc, Obj) else None
    return ops if isinstance(ops, list) else []


def context(doc, folder):
    """Names of this plan's buffers, programs, ops, variables and files."""
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    names = (section(doc, "buffers").keys() + section(doc, "programs").keys() + section(doc, "variables").keys()
             + [op.get("id") for op in ops_of(doc) if isinstance(op, Obj) and isinstance(op.get("id"), str)])
    return {"names": names, "files": files}


def pick(rng, items):
    return rng.choice(items) if items else None


def pick_node(rng, doc, want=None):
    """A random (container, index, value, path) whose value passes `want`,
    never a kernel's source or its defines: values there change what the
    kernel computes and where it indexes (m_program breaks them on purpose,
    only syntactically)."""
    nodes = [n for n in walk(doc) if (want is None or want(n[2], n[3]))
             and not (n[3] and n[3][-1] == "source") and "defines" not in n[3][:-1]]
    return pick(rng, nodes)


def m_delete_key(rng, doc, ctx):
    node = pick_node(rng, doc, lambda v, p: True)
    if node is None:
        return None
    container, index, _, path = node
    del container[index]
    return f"delete {fmt_path(path)}"


def m_duplicate_key(rng, doc, ctx):
    objects = [v for _, _, v, _ in walk(doc) if isinstance(v, Obj) and v] + [doc]
    obj = rng.choice(objects)
    k, v = rng.choice(obj)
    value = v if rng.random() < 0.5 else any_value(rng, ctx)
    obj.insert(rng.randrange(len(obj) + 1), [k, value])
    return f"duplicate key {k!r} (value {short(value)})"


def replace_node(rng, doc, want, new_value):
    """Replaces a random value that passes `want` with new_value(); the
    mutation's description, or None when no value passes."""
    node = pick_node(rng, doc, want)
    if node is None:
        return None
    container, index, old, path = node
    value = new_value()
    put(container, index, value)
    return f"{fmt_path(path)}: {short(old)} -> {short(value)}"


def m_number(rng, doc, ctx):
    def number():
        value = rng.choice(BAD_RAW) if rng.random() < 0.05 else interesting_number(rng)
        return Raw(value) if isinstance(value, str) and value in BAD_RAW else value
    return replace_node(rng, doc, lambda v, p: isinstance(v, (int, float)) and not isinstance(v, Raw), number)


def m_string(rng, doc, ctx):
    return replace_node(rng, doc, lambda v, p: isinstance(v, str) and not isinstance(v, Raw),
                        lambda: interesting_string(rng, ctx))


def m_retype(rng, doc, ctx):
    return replace_node(rng, doc, lambda v, p: True, lambda: any_value(rng, ctx))


def m_key_name(rng, doc, ctx):
    objects = [(v, p) for _, _, v, p in walk(doc) if isinstance(v, Obj) and v]
    if not objects:
        return None
    obj, path = rng.choice(objects)
    pair = rng.choice(obj)
    old = pair[0]
    pair[0] = rng.choice(["", old.upper(), old + " ", old + "\x00", "\u00e9" + old, old[:-1], "a" * 200, "__proto__",
                          pick(rng, ctx["names"]) or "x"])
    return f"{fmt_path(path)}: key {old!r} -> {pair[0]!r}"


def m_ops_order(rng, doc, ctx):
    ops = ops_of(doc)
    if len(ops) < 1:
        return None
    r = rng.random()
    if r < 0.4 and len(ops) >= 2:
        i, j = rng.sample(range(len(ops)), 2)
        ops[i], ops[j] = ops[j], ops[i]
        return f"swap ops[{i}] and ops[{j}]"
    if r < 0.55:
        ops.reverse()
        return "reverse the ops"
    if r < 0.7:
        rng.shuffle(ops)
        return "shuffle the ops"
    if r < 0.85:
        i = rng.randrange(len(ops))
        ops.insert(rng.randrange(len(ops) + 1), json_copy(ops[i]))
        return f"duplicate ops[{i}]"
    i = rng.randrange(len(ops))
    del ops[i]
    return f"delete ops[{i}]"


def m_rename_partly(rng, doc, ctx):
    """Renames a buffer, program, op id or variable in one place only."""
    kind = rng.choice(["buffers", "programs", "variables"])
    obj = section(doc, kind)
    if not obj:
        return None
    pair = rng.choice(obj)
    old = pair[0]
    if rng.random() < 0.5:
        pair[0] = old + "_renamed"
        return f"rename {kind} {old!r} where it is declared only"
    refs = [n for n in walk(doc) if n[2] == old and not (len(n[3]) == 2 and n[3][0] == kind)]
    if not refs:
        return None
    container, index, _, path = rng.choice(refs)
    put(container, index, old + "_renamed")
    return f"rename the use of {old!r} at {fmt_path(path)} only"


def m_dtype(rng, doc, ctx):
    node = pick_node(rng, doc, lambda v, p: p and p[-1] == "dtype")
    if node is None:
        return None
    container, index, old, path = node
    value = rng.choice(DTYPES)
    put(container, index, value)
    return f"{fmt_path(path)}: {old!r} -> {value!r}"


def m_size(rng, doc, ctx):
    buffers = section(doc, "buffers")
    if not buffers:
        return None
    name, spec = rng.choice(buffers)
    if not isinstance(spec, Obj):
        return None
    r = rng.random()
    if r < 0.3:
        value = rng.choice([0, -1, 1, 2**24, 2**38, 2**40, 2**40 + 1, 2**62, 2**64, 1.5, "4", None, [4]])
        spec.remove("shape")
        spec.set("count", value)
        return f"buffers.{name}.count = {short(value)}"
    if r < 0.6:
        value = rng.choice([[], [0], [-1], [4, 0], [2**32, 2**32], [2**21, 2**21, 2**21], [1] * 40, [1.5],
                           ["4"], [None], [[4]], [2**63], [3, -3], [2**31, 2**31]])
        spec.remove("count")
        spec.set("shape", value)
        return f"buffers.{name}.shape = {short(value)}"
    if r < 0.8:
        spec.set("count", rng.choice([1, 4, 256]))
        spec.set("shape", rng.choice([[4], [2, 2], [1]]))
        return f"buffers.{name}: both count and shape"
    count = spec.get("count")
    if isinstance(count, int) and not isinstance(count, bool):
        value = rng.choice([count - 1, count + 1, count // 2, count * 2, 1])
        spec.set("count", max(value, 1))
        return f"buffers.{name}.count: {count} -> {max(value, 1)}"
    shape = spec.get("shape")
    if isinstance(shape, list) and shape and all(isinstance(d, int) for d in shape):
        i = rng.randrange(len(shape))
        shape[i] = max(1, rng.choice([shape[i] - 1, shape[i] // 2, shape[i] + 1, 1]))
        return f"buffers.{name}.shape[{i}] -> {shape[i]}"
    return None


def m_view(rng, doc, ctx):
    buffers = section(doc, "buffers")
    views = [(n, s) for n, s in buffers if isinstance(s, Obj) and "view" in s.keys()]
    bases = [n for n, s in buffers if isinstance(s, Obj) and "view" not in s.keys()]
    if not views:
        if not bases:
            return None
        base = rng.choice(bases)
        name = "view_" + str(rng.randrange(1000))
        offset = rng.choice([0, 1, -1, 2**40, 2**63])
        count = rng.choice([1, 0, -1, 2**62, 2**40])
        buffers.append([name, Obj([["view", base], ["offset", offset], ["count", count]])])
        return f"add view {name} of {base} at {offset}, {count} elements"
    name, spec = rng.choice(views)
    r = rng.random()
    if r < 0.25:
        spec.set("view", rng.choice([name, rng.choice(views)[0], "nonexistent", ""] + bases))
        return f"buffers.{name}.view = {spec.get('view')!r}"
    if r < 0.5:
        spec.set("offset", rng.choice([-1, 2**62, 2**63, 2**64, 767, 768, 769, 1.5, "0"] + SMALL_INTS))
        return f"buffers.{name}.offset = {short(spec.get('offset'))}"
    if r < 0.75:
        spec.set("count", rng.choice([0, -1, 2**62, 2**63, 2**64 - 1, 1, 768, 769]))
        return f"buffers.{name}.count = {short(spec.get('count'))}"
    key = rng.choice(["dtype", "device", "init", "shape"])
    spec.set(key, {"dtype": "f64", "device": "CL:0", "init": Obj([["fill", 1]]), "shape": [2, 2]}[key])
    return f"buffers.{name}: add {key} to a view"


def m_init(rng, doc, ctx):
    buffers = [(n, s) for n, s in section(doc, "buffers") if isinstance(s, Obj) and "view" not in s.keys()]
    if not buffers:
        return None
    name, spec = rng.choice(buffers)
    npys = [f for f in ctx["files"] if f.endswith(".npy")]
    choices = [
        "zeros", Obj([["zeros", Obj()]]), Obj([["zeros", False]]), Obj([["zeros", 1]]),
        Obj([["fill", interesting_number(rng)]]),
        Obj([["arange", Obj([["start", interesting_number(rng)], ["step", interesting_number(rng)]])]]),
        Obj([["arange", Obj([["start", 0]])]]),
        Obj([["uniform", Obj([["low", 1], ["high", -1], ["seed", 1]])]]),
        Obj([["uniform", Obj([["low", -1e308], ["high", 1e308], ["seed", rng.choice([-1, 2**64, 0, 1.5])]])]]),
        Obj([["normal", Obj([["mean", 0], ["std", rng.choice([-1, 0, 1e308, 1e-320])], ["seed", 3]])]]),
        Obj([["npy", rng.choice(npys + STRINGS[-20:]) if npys else rng.choice(STRINGS[-20:])]]),
        Obj([["fill", 1], ["npy", "x.npy"]]), Obj(), "ones", 0, None, [],
    ]
    value = rng.choice(choices)
    spec.set("init", value)
    return f"buffers.{name}.init = {short(value)}"


def m_variable(rng, doc, ctx):
    variables = section(doc, "variables")
    r = rng.random()
    if not variables or r < 0.2:
        name = rng.choice(["rank", "world_size", "min", "max", "1N", "N N", "", "core_id", "V", "n"])
        value = Obj([["min", rng.choice([0, -2**63, 5])], ["max", rng.choice([10, 2**63 - 1, 1])],
                     ["value", rng.choice([1, -1, 2**63 - 1, 11])]])
        if not isinstance(doc.get("variables"), Obj):
            doc.set("variables", Obj())
        doc.get("variables").append([name, value])
        return f"add variable {name!r} = {short(value)}"
    name, spec = rng.choice(variables)
    if not isinstance(spec, Obj):
        return None
    key = rng.choice(["min", "max", "value"])
    value = rng.choice([spec.get("max"), spec.get("min"), -1, 0, 2**63 - 1, -2**63, 2**63, 2**31, 1.5, "1", None])
    if rng.random() < 0.3:
        spec.remove(key)
        return f"variables.{name}: delete {key}"
    spec.set(key, value)
    return f"variables.{name}.{key} = {short(value)}"


def m_launch(rng, doc, ctx):
    programs = [(n, p) for n, p in section(doc, "programs") if isinstance(p, Obj)]
    if not programs:
        return None
    name, program = rng.choice(programs)
    key = rng.choice(["global_size", "local_size"])
    r = rng.random()
    if r < 0.5:
        dims = [rng.choice(EXPRESSIONS + [0, -1, 2**31, 2**62, 2**63, 1, 2, 1024, 1.5, None])
                for _ in range(rng.choice([1, 1, 2, 3]))]
    else:
        dims = rng.choice([[], [1, 1, 1, 1], [0, 1, 1], [1, 0, 1], [2**32, 2**32, 2**32], "4", 4, [[4]],
                           [2**21, 2**21, 2**21], ["N", "N", "N"], [Obj()]])
    program.set(key, dims)
    return f"programs.{name}.{key} = {short(dims)}"


def m_op_scalars(rng, doc, ctx):
    ops = [op for op in ops_of(doc) if isinstance(op, Obj) and "run" in op.keys()]
    if not ops:
        return None
    op = rng.choice(ops)
    scalars = op.get("scalars")
    if not isinstance(scalars, Obj) or not scalars or rng.random() < 0.2:
        value = rng.choice([Obj([["core_id", 1]]), Obj([["unknown", 1]]), [], 4, Obj([["n", "N"], ["n", 4]])])
        op.set("scalars", value)
        return f"op {short(op.get('id'))}: scalars = {short(value)}"
    pair = rng.choice(scalars)
    if rng.random() < 0.2:
        scalars.remove(pair[0])
        return f"op {short(op.get('id'))}: drop scalar {pair[0]!r}"
    old, pair[1] = pair[1], rng.choice(EXPRESSIONS + HUGE_INTS + [0, -1, 1.5, None, True, "N-N-1"])
    return f"op {short(op.get('id'))}: scalar {pair[0]!r}: {short(old)} -> {short(pair[1])}"


def m_op_buffers(rng, doc, ctx):
    ops = [op for op in ops_of(doc) if isinstance(op, Obj) and isinstance(op.get("buffers"), list)]
    if not ops:
        return None
    op = rng.choice(ops)
    buffers = op.get("buffers")
    names = section(doc, "buffers").keys()
    r = rng.random()
    if r < 0.4 and buffers:
        i = rng.randrange(len(buffers))
        buffers[i] = rng.choice(names + ["nonexistent", "", 0])
        return f"op {short(op.get('id'))}: buffers[{i}] = {short(buffers[i])}"
    if r < 0.6 and len(buffers) >= 2:
        i, j = rng.sample(range(len(buffers)), 2)
        buffers[i], buffers[j] = buffers[j], buffers[i]
        return f"op {short(op.get('id'))}: swap buffers {i} and {j}"
    if r < 0.8:
        buffers.append(rng.choice(names or ["x"]))
        return f"op {short(op.get('id'))}: one buffer too many"
    if buffers:
        buffers.pop()
        return f"op {short(op.get('id'))}: one buffer too few"
    return None


def m_after(rng, doc, ctx):
    ops = [op for op in ops_of(doc) if isinstance(op, Obj)]
    if not ops:
        return None
    i = rng.randrange(len(ops))
    op = ops[i]
    ids = [o.get("id") for o in ops if isinstance(o.get("id"), str)]
    value = rng.choice([[i], [op.get("id")], [len(ops)], [-1], [2**63], [2**64], ["nonexistent"], [1.5], "0",
                        [None], list(range(len(ops))), ids, [0, 0], [Obj()]])
    op.set("after", value)
    if rng.random() < 0.3 and i > 0:  # and a cycle through an earlier op
        ops[0].set("after", [i])
    return f"ops[{i}].after = {short(value)}"


def m_copy(rng, doc, ctx):
    names = section(doc, "buffers").keys()
    if not names:
        return None
    ops = ops_of(doc)
    copies = [op for op in ops if isinstance(op, Obj) and isinstance(op.get("copy"), Obj)]
    if copies and rng.random() < 0.6:
        copy = rng.choice(copies).get("copy")
        key = rng.choice(["dst", "src"])
        copy.set(key, rng.choice(names + ["nonexistent", "", None]))
        return f"a copy's {key} = {short(copy.get(key))}"
    dst, src = rng.choice(names), rng.choice(names)
    if not isinstance(doc.get("ops"), list):
        doc.set("ops", [])
    doc.get("ops").insert(rng.randrange(len(ops_of(doc)) + 1), Obj([["copy", Obj([["dst", dst], ["src", src]])]]))
    return f"add copy {dst} <- {src}"


def m_custom(rng, doc, ctx):
    names = section(doc, "buffers").keys()
    fn = rng.choice(["fill", "print", "all_reduce", "nonexistent", "", "FILL"])
    attrs = rng.choice([Obj([["value", interesting_number(rng)]]), Obj([["op", rng.choice(["sum", "max", "min", "prod",
                                                                                            "", 1])]]),
                        Obj([["label", rng.choice(STRINGS)], ["limit", rng.choice(HUGE_INTS + [-1, 0])]]),
                        Obj([["value", Obj()]]), Obj(), [], "x"])
    buffers = rng.sample(names, min(len(names), rng.choice([0, 1, 2, 3])))
    op = Obj([["custom", fn], ["buffers", buffers], ["attrs", attrs]])
    if not isinstance(doc.get("ops"), list):
        doc.set("ops", [])
    doc.get("ops").insert(rng.randrange(len(ops_of(doc)) + 1), op)
    return f"add custom {fn!r} on {buffers} with {short(attrs)}"


def m_collective(rng, doc, ctx):
    names = section(doc, "buffers").keys()
    if not names:
        return None
    existing = [op.get("collective") for op in ops_of(doc) if isinstance(op, Obj)
                and isinstance(op.get("collective"), Obj)]
    if existing and rng.random() < 0.6:
        c = rng.choice(existing)
        key = rng.choice(["kind", "op", "root", "buffers", "src", "dst", "extra"])
        value = {"kind": rng.choice(["all_reduce", "broadcast", "all_gather", "reduce_scatter", "gather", ""]),
                 "op": rng.choice(["sum", "prod", "min", "max", "avg", ""]),
                 "root": rng.choice([0, 1, -1, 2**31, 2**63, 1024, "0"]),
                 "buffers": rng.choice([[], names[:1], names, ["nonexistent"], [names[0], names[0]]]),
                 "src": rng.choice(names), "dst": rng.choice(names), "extra": 1}[key]
        c.set(key, value)
        return f"collective.{key} = {short(value)}"
    kind = rng.choice(["all_reduce", "broadcast", "all_gather", "reduce_scatter"])
    fields = {"all_reduce": [["buffers", rng.sample(names, 1)], ["op", "sum"]],
              "broadcast": [["buffers", rng.sample(names, 1)], ["root", rng.choice([0, 1])]],
              "all_gather": [["src", rng.choice(names)], ["dst", rng.choice(names)]],
              "reduce_scatter": [["src", rng.choice(names)], ["dst", rng.choice(names)], ["op", "max"]]}[kind]
    op = Obj([["collective", Obj([["kind", kind]] + fields)]])
    if not isinstance(doc.get("ops"), list):
        doc.set("ops", [])
    doc.get("ops").insert(rng.randrange(len(ops_of(doc)) + 1), op)
    return f"add collective {kind} {short(fields)}"


def m_outputs(rng, doc, ctx):
    outputs = section(doc, "outputs")
    names = section(doc, "buffers").keys()
    r = rng.random()
    if r < 0.25 or not outputs:
        name = rng.choice(names + ["nonexistent", ""]) if names else "nonexistent"
        value = rng.choice([Obj(), Obj([["npy", rng.choice(SAFE_OUTPUT_NAMES)]]),
                            Obj([["expect", Obj([["values", []]])]]),
                            Obj([["expect", Obj([["values", [1] * rng.choice([1, 100000])]])]])])
        if not isinstance(doc.get("outputs"), Obj):
            doc.set("outputs", Obj())
        doc.get("outputs").append([name, value])
        return f"add output {name!r}: {short(value)}"
    name, spec = rng.choice(outputs)
    if not isinstance(spec, Obj):
        return None
    if r < 0.45:
        spec.set("npy", rng.choice(SAFE_OUTPUT_NAMES))
        return f"outputs.{name}.npy = {spec.get('npy')!r}"
    expect = spec.get("expect")
    if not isinstance(expect, Obj):
        expect = Obj([["values", [0]]])
        spec.set("expect", expect)
    key = rng.choice(["rtol", "atol", "prefix", "values", "npy", "both", "unknown"])
    npys = [f for f in ctx["files"] if f.endswith(".npy")]
    value = {"rtol": rng.choice([-1, 0, 1e308, Raw("1e999"), "0.1", None]),
             "atol": rng.choice([-1, 0, 1e308, Raw("-0"), None]),
             "prefix": rng.choice([1, 0, "true", None, Obj()]),
             "values": rng.choice([[], [None], ["1"], [Raw("1e999")], [[1]], [1e308, -1e308], [2**64], [True, False]]),
             "npy": rng.choice(npys + ["/dev/zero", "fifo", "dir", "empty.npy", "nonexistent.npy"]),
             "both": None, "unknown": 1}[key]
    if key == "both":
        expect.set("values", [1])
        expect.set("npy", rng.choice(npys or ["x.npy"]))
    else:
        expect.set(key, value)
    return f"outputs.{name}.expect.{key} = {short(value)}"


def m_program(rng, doc, ctx):
    programs = [(n, p) for n, p in section(doc, "programs") if isinstance(p, Obj)]
    if not programs:
        return None
    name, program = rng.choice(programs)
    key = rng.choice(["language", "device", "entry", "source", "source_file", "defines", "buffers", "scalars",
                      "flops", "both_sources", "unknown"])
    if key == "language":
        program.set(key, rng.choice(LANGUAGES))
    elif key == "device":
        program.set(key, rng.choice(DEVICES))
    elif key == "entry":
        program.set(key, rng.choice(ENTRIES))
    elif key == "source":
        source = program.get("source")
        if not isinstance(source, str) or not source:
            return None
        cut = rng.randrange(len(source))
        broken = rng.choice([source[:cut], source[:cut] + "@#$" + source[cut:], "", source + "\n}}}",
                             source.replace("{", "", 1), "\x00" + source, source + "\n#error mutated\n",
                             source.replace("(", "[", 1)])
        program.set(key, broken)
        return f"programs.{name}.source broken (syntax)"
    elif key == "source_file":
        program.remove("source")
        program.set(key, rng.choice(ctx["files"] + ["/dev/zero", "/dev/null", "/proc/self/status", "fifo", "loop",
                                                     "dir", "/", "nonexistent.c", "", "plan.json"]))
    elif key == "both_sources":
        program.set("source", "void k(void) {}")
        program.set("source_file", rng.choice(ctx["files"] or ["k.c"]))
    elif key == "defines":
        defines = program.get("defines")
        if isinstance(defines, Obj) and defines and rng.random() < 0.4:
            gone = rng.choice(defines)[0]
            defines.remove(gone)
            return f"programs.{name}: drop define {gone}"
        # Names and values that break the compile (or must be refused),
        # never ones that make the kernel index differently.
        define = rng.choice([["", 1], ["1X", 1], ["A B", 1], ["A=B", 1], ["X\n#error injected", 1], ["(", 1],
                             ["OK_NAME", "1 +"], ["OK_NAME", "\"unterminated"], ["OK_NAME", Obj()],
                             ["OK_NAME", [1]], ["OK_NAME", None], ["OK_NAME", 2**64], ["OK_NAME", 1.5],
                             ["OK_NAME", "x\n#error injected"], ["__FILE__", 1], ["OK_NAME", "a" * 100000]])
        if not isinstance(defines, Obj):
            defines = Obj()
            program.set("defines", defines)
        defines.append(define)
        return f"programs.{name}: define {short(define[0])} = {short(define[1])}"
    elif key == "buffers":
        params = program.get("buffers")
        if not isinstance(params, list) or not params:
            return None
        i = rng.randrange(len(params))
        param = params[i]
        if not isinstance(param, Obj):
            return None
        field = rng.choice(["access", "dtype", "name", "min_count", "drop", "dup"])
        if field == "access":
            param.set("access", rng.choice(ACCESS))
        elif field == "dtype":
            param.set("dtype", rng.choice(DTYPES))
        elif field == "name":
            param.set("name", rng.choice(["", "core_id", "n"] + [p.get("name") for p in params if isinstance(p, Obj)]))
        elif field == "min_count":
            param.set("min_count", rng.choice(EXPRESSIONS + HUGE_INTS + ["n", "n * 4", "n*n*n*n", 1.5, None]))
        elif field == "drop":
            del params[i]
        else:
            params.append(json_copy(param))
        return f"programs.{name}.buffers[{i}]: {field} -> {short(param.get(field) if field in param.keys() else '')}"
    elif key == "scalars":
        params = program.get("scalars")
        if not isinstance(params, list):
            params = []
            program.set("scalars", params)
        r = rng.random()
        if r < 0.3 or not params:
            value = Obj([["name", rng.choice(["core_id", "n", "extra", ""])], ["type", rng.choice(["i32", "i64"])]])
            params.insert(rng.randrange(len(params) + 1), value)
            return f"programs.{name}: add scalar {short(value)}"
        param = rng.choice(params)
        if not isinstance(param, Obj):
            return None
        field = rng.choice(["type", "min", "max", "name"])
        value = {"type": rng.choice(["i8", "u32", "u64", "f32", "i128", "", "I32"]),
                 "min": rng.choice(HUGE_INTS + [1, 0]), "max": rng.choice(HUGE_INTS + [-1, 0]),
                 "name": rng.choice(["core_id", "", "n n", "rank"])}[field]
        param.set(field, value)
        return f"programs.{name}.scalars: {field} = {short(value)}"
    elif key == "flops":
        program.set(rng.choice(["flops", "bytes"]), rng.choice(EXPRESSIONS + HUGE_INTS + [Raw("1e999"), -1e300, 1e300]))
    else:
        program.set(rng.choice(["unknown", "Source", "entry "]), 1)
    return f"programs.{name}.{key} = {short(program.get(key))}"


def m_device(rng, doc, ctx):
    r = rng.random()
    if r < 0.3:
        doc.set("device", rng.choice(DEVICES))
        return f"device = {doc.get('device')!r}"
    kind = "buffers" if r < 0.65 else "programs"
    items = [(n, s) for n, s in section(doc, kind) if isinstance(s, Obj)]
    if not items:
        return None
    name, spec = rng.choice(items)
    spec.set("device", rng.choice(DEVICES))
    return f"{kind}.{name}.device = {spec.get('device')!r}"


def m_top(rng, doc, ctx):
    r = rng.random()
    if r < 0.4:
        doc.set("svod_plan", rng.choice([0, 2, -1, "1", Raw("1.0"), 2**64, None, True]))
        return f"svod_plan = {short(doc.get('svod_plan'))}"
    if r < 0.6:
        key = rng.choice(["svod_plan", "buffers", "ops", "programs", "outputs", "variables"])
        doc.remove(key)
        return f"drop top-level {key}"
    if r < 0.8:
        doc.set(rng.choice(["svod_tune", "unknown", "Buffers", ""]), 1)
        return "an unknown top-level field"
    key = rng.choice(["buffers", "ops", "programs", "outputs", "variables", "description"])
    doc.set(key, rng.choice([None, [], Obj(), 1, "x", [Obj()]]))
    return f"{key} = {short(doc.get(key))}"


def m_deep(rng, doc, ctx):
    node = pick_node(rng, doc, lambda v, p: True)
    if node is None:
        return None
    container, index, _, path = node
    depth = rng.choice([200, 255, 256, 257, 1000, 100000])
    put(container, index, deep(depth, rng.choice("[{")))
    return f"{fmt_path(path)}: nested {depth} deep"


def m_scale(rng, doc, ctx):
    """Many buffers or ops with distinct names (fast to run, big to load)."""
    count = rng.choice([500, 2000, 5000])
    if rng.random() < 0.5:
        buffers = section(doc, "buffers")
        if not buffers:
            return None
        for i in range(count):
            buffers.append([f"extra_{i}", Obj([["dtype", "u8"], ["count", 1 + i % 7]])])
        return f"{count} more buffers"
    ops = [op for op in ops_of(doc) if isinstance(op, Obj) and ("run" in op.keys() or "custom" in op.keys())]
    if not ops:
        return None
    op = rng.choice(ops)
    all_ops = doc.get("ops")
    for i in range(count // 10):
        clone = json_copy(op)
        clone.set("id", f"extra_{i}")
        all_ops.append(clone)
    return f"{count // 10} more copies of op {short(op.get('id'))}"


STRUCTURAL = [
    (m_delete_key, 6), (m_duplicate_key, 3), (m_number, 8), (m_string, 6), (m_retype, 3), (m_key_name, 2),
    (m_ops_order, 4), (m_rename_partly, 3), (m_dtype, 4), (m_size, 6), (m_view, 4), (m_init, 5),
    (m_variable, 4), (m_launch, 5), (m_op_scalars, 5), (m_op_buffers, 4), (m_after, 3), (m_copy, 3),
    (m_custom, 3), (m_collective, 3), (m_outputs, 4), (m_program, 8), (m_device, 3), (m_top, 2), (m_deep, 2),
    (m_scale, 1),
]


def weighted(rng, table):
    total = sum(w for _, w in table)
    r = rng.uniform(0, total)
    for item, w in table:
        r -= w
        if r <= 0:
            return item
    return table[-1][0]


# ---------------------------------------------------------------------------
# Mutations that must not change the results, and ones that must fail.

EXPRESSION_FIELDS = ("global_size", "local_size", "flops", "bytes", "min_count")


def rename_everywhere(doc, kind, old, new):
    """Renames buffer/program/op id/variable `old` in every place it is used."""
    for container, index, value, path in list(walk(doc)):
        if kind == "buffers":
            declared = len(path) == 2 and path[0] in ("buffers", "outputs") and path[1] == old
            used = value == old and path and (
                path[0] == "ops" and any(p in ("buffers", "dst", "src") for p in path[2:])
                or path[0] == "buffers" and path[-1] == "view")
        elif kind == "programs":
            declared = len(path) == 2 and path[0] == "programs" and path[1] == old
            used = value == old and len(path) == 3 and path[0] == "ops" and path[2] == "run"
        elif kind == "ops":
            declared = False
            used = value == old and path and path[0] == "ops" and (path[2:3] == ("id",) or "after" in path)
        else:  # variables: every expression
            declared = len(path) == 2 and path[0] == "variables" and path[1] == old
            used = False
            if isinstance(value, str) and path and (
                    path[0] == "ops" and "scalars" in path or path[0] == "programs"
                    and any(f in path for f in EXPRESSION_FIELDS)):
                renamed = re.sub(r"\b%s\b" % re.escape(old), new, value)
                if renamed != value:
                    put(container, index, renamed)
        if declared:
            container[index][0] = new
        elif used:
            put(container, index, new)


def neutral(rng, doc, base):
    """A change that must leave every output as it was; its description."""
    r = rng.random()
    if r < 0.25:
        for _, _, value, path in list(walk(doc)):
            if isinstance(value, Obj):
                rng.shuffle(value)
        if isinstance(doc, Obj):
            rng.shuffle(doc)
        return "every object's keys reordered"
    if r < 0.55:
        kinds = [k for k in ("buffers", "programs", "variables") if section(doc, k)]
        ids = [op.get("id") for op in ops_of(doc) if isinstance(op, Obj) and isinstance(op.get("id"), str)]
        kind = rng.choice(kinds + (["ops"] if ids else []))
        old = rng.choice(ids if kind == "ops" else section(doc, kind).keys())
        if kind == "variables":
            scalars = {p.get("name") for _, p in section(doc, "programs") if isinstance(p, Obj)
                       for p in (p.get("scalars") or []) if isinstance(p, Obj)}
            if old in scalars:
                return None
        new = rng.choice(["renamed_", "r\u00e9nam\u00e9_", "R_"]) + str(rng.randrange(100))
        if kind == "variables":
            new = "V_" + str(rng.randrange(100))
        rename_everywhere(doc, kind, old, new)
        return f"{kind} {old!r} renamed to {new!r} everywhere"
    if r < 0.7:
        return "strings written with \\u escapes"  # by the dump below
    if r < 0.85:
        return "indented"
    return "as it is, with CLI flags that change nothing"


def escaped(rng):
    def escape(s):
        out = []
        for ch in s:
            if ch.isalnum() and rng.random() < 0.3:
                out.append("\\u%04x" % ord(ch))
            else:
                out.append(json.dumps(ch, ensure_ascii=rng.random() < 0.5)[1:-1])
        return '"' + "".join(out) + '"'
    return escape


def tamper_expectation(rng, doc, folder, tag):
    """Makes one expectation impossible; its description, or None. A changed
    .npy file is written into `folder` named after `tag`."""
    outputs = section(doc, "outputs")
    expected = [(n, s) for n, s in outputs if isinstance(s, Obj) and isinstance(s.get("expect"), Obj)]
    if not expected:
        if not outputs:
            return None
        name, spec = rng.choice(outputs)
        if not isinstance(spec, Obj):
            return None
        spec.set("expect", Obj([["values", [1e30]], ["prefix", True]]))
        return f"outputs.{name}: expect a first value of 1e30"
    name, spec = rng.choice(expected)
    expect = spec.get("expect")
    values = expect.get("values")
    if isinstance(values, list) and values:
        i = rng.randrange(len(values))
        old = values[i]
        values[i] = (old * 2 + 1000) if isinstance(old, (int, float)) and not isinstance(old, bool) else 12345
        return f"outputs.{name}.expect.values[{i}]: {old} -> {values[i]}"
    npy = expect.get("npy")
    if isinstance(npy, str) and (folder / npy).is_file():
        tampered = f"tampered_{tag}_" + pathlib.Path(npy).name
        data = tamper_npy((folder / npy).read_bytes(), rng)
        if data is None:
            return None
        (folder / tampered).write_bytes(data)
        expect.set("npy", tampered)
        return f"outputs.{name}.expect.npy: {npy} with one value changed"
    return None


def tamper_npy(data, rng):
    """An .npy file's bytes with one element moved far off; None if unknown."""
    if not data.startswith(b"\x93NUMPY"):
        return None
    major = data[6]
    if major == 1:
        header_len = struct.unpack_from("<H", data, 8)[0]
        start = 10 + header_len
    else:
        header_len = struct.unpack_from("<I", data, 8)[0]
        start = 12 + header_len
    header = data[10:start].decode("latin-1")
    m = re.search(r"'descr':\s*'([<>|=]?)([a-z])(\d+)'", header)
    if not m or m.group(1) == ">":
        return None
    fmt = {("f", "4"): "<f", ("f", "8"): "<d", ("i", "4"): "<i", ("i", "8"): "<q", ("u", "1"): "<B",
           ("i", "1"): "<b", ("b", "1"): "<?"}.get((m.group(2), m.group(3)))
    count = (len(data) - start) // struct.calcsize(fmt) if fmt else 0
    if not count:
        return None
    i = rng.randrange(count)
    at = start + i * struct.calcsize(fmt)
    old = struct.unpack_from(fmt, data, at)[0]
    new = {"<?": not old, "<B": (old + 100) % 256, "<b": (old + 100) % 128}.get(fmt, old * 2 + 1000)
    out = bytearray(data)
    struct.pack_into(fmt, out, at, new)
    return bytes(out)


# ---------------------------------------------------------------------------
# Raw text mutations of a plan.


def mutate_text(rng, text):
    data = bytearray(text)
    r = rng.random()
    n = len(data)
    at = rng.randrange(n) if n else 0
    if r < 0.15:
        del data[at:]
        return bytes(data), f"truncated at byte {at}"
    if r < 0.3:
        end = min(n, at + rng.choice([1, 2, 8, 64]))
        del data[at:end]
        return bytes(data), f"bytes {at}..{end} deleted"
    if r < 0.45:
        junk = rng.choice([b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"{", b"}", b"[", b"]", b",", b":", b'"',
                           b"\\", b"/*c*/", b"//c\n", b"\xef\xbb\xbf", b"NaN", b"\\u0000", bytes([rng.randrange(256)])])
        data[at:at] = junk
        return bytes(data), f"{junk!r} inserted at byte {at}"
    if r < 0.6 and n:
        data[at] ^= 1 << rng.randrange(8)
        return bytes(data), f"a bit flipped at byte {at}"
    if r < 0.7:
        end = min(n, at + rng.choice([4, 32, 256]))
        data[at:at] = data[at:end] * rng.choice([1, 2, 100])
        return bytes(data), f"bytes {at}..{end} repeated"
    if r < 0.8:
        numbers = [m for m in re.finditer(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?", data)]
        if numbers:
            m = rng.choice(numbers)
            token = rng.choice(BAD_RAW + RAW_NUMBERS).encode()
            data[m.start():m.end()] = token
            return bytes(data), f"number {m.group().decode()} at byte {m.start()} -> {token.decode()}"
    if r < 0.87:
        commas = [m.start() for m in re.finditer(rb"[}\]]", data)]
        if commas:
            at = rng.choice(commas)
            data[at:at] = b","
            return bytes(data), f"trailing comma at byte {at}"
    if r < 0.93:
        return b"\xef\xbb\xbf" + bytes(data), "a byte-order mark first"
    return bytes(data) + rng.choice([b"\n{}", b"x", b"\x00", b" " * 1000, b"]"]), "junk after the document"


# ---------------------------------------------------------------------------
# Package container (docs/PACKAGE_FORMAT.md).

MAGIC = b"SVODPKG\0"
SIGNATURE_MAGIC = b"SVODSIG\0"
SIGNATURE_BLOCK = 112
HEADER, ENTRY, NAME_FIELD = 64, 128, 96


class _Hash128(ctypes.Structure):
    _fields_ = [("low", ctypes.c_uint64), ("high", ctypes.c_uint64)]


_xxhash = None


def xxh3_128(data):
    """XXH3-128 of `data` as 16 bytes, low word first (svod's digest)."""
    global _xxhash
    if _xxhash is None:
        names = [ctypes.util.find_library("xxhash"), "libxxhash.so.0", "libxxhash.so"]
        for name in filter(None, names):
            try:
                _xxhash = ctypes.CDLL(name)
                break
            except OSError:
                continue
        else:
            raise RuntimeError("libxxhash not found (Debian: libxxhash0); needed for package digests")
        _xxhash.XXH3_128bits.restype = _Hash128
        _xxhash.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    h = _xxhash.XXH3_128bits(bytes(data), len(data))
    return struct.pack("<QQ", h.low, h.high)


def align(n):
    return (n + 63) // 64 * 64


def write_package(sections):
    """The bytes of a package of [(name, data)], as svod's writer makes them."""
    table_end = HEADER + ENTRY * len(sections)
    offsets, end = [], table_end
    for _, data in sections:
        offsets.append(align(end))
        end = offsets[-1] + len(data)
    out = bytearray(end)
    out[0:8] = MAGIC
    struct.pack_into("<IIQ", out, 8, 1, len(sections), end)
    for i, (name, data) in enumerate(sections):
        entry = HEADER + i * ENTRY
        raw = name.encode() if isinstance(name, str) else name
        out[entry:entry + min(len(raw), NAME_FIELD)] = raw[:NAME_FIELD]
        struct.pack_into("<QQ", out, entry + NAME_FIELD, offsets[i], len(data))
        out[entry + NAME_FIELD + 16:entry + ENTRY] = xxh3_128(data)
        out[offsets[i]:offsets[i] + len(data)] = data
    fix_digests(out, table=True)
    return bytes(out)


def fix_digests(out, table=True, sections=False):
    """Recomputes (the sections' and) the table's and the header's digests."""
    if len(out) < HEADER:
        return
    count = struct.unpack_from("<I", out, 12)[0]
    if (sections or table) and HEADER + count * ENTRY <= len(out):
        if sections:
            for i in range(count):
                entry = HEADER + i * ENTRY
                offset, size = struct.unpack_from("<QQ", out, entry + NAME_FIELD)
                if offset <= len(out) and size <= len(out) - offset:
                    out[entry + NAME_FIELD + 16:entry + ENTRY] = xxh3_128(out[offset:offset + size])
        if table:
            out[24:40] = xxh3_128(out[HEADER:HEADER + count * ENTRY])
    out[48:64] = xxh3_128(out[:48])


def read_package(data):
    """[(name, bytes)] of a package that follows the format, else a string
    saying what is wrong. Mirrors every check the format document lists."""
    if len(data) < 8 or data[:8] != MAGIC:
        return "not a package"
    if len(data) < HEADER:
        return "truncated header"
    if data[48:64] != xxh3_128(data[:48]):
        return "header digest"
    version, count, size = struct.unpack_from("<IIQ", data, 8)
    if version not in (1, 2):  # this svod writes 2 and reads 1 as well
        return "version"
    if any(data[40:48]):
        return "reserved bytes"
    if HEADER <= size < len(data) and data[size:size + 8] == SIGNATURE_MAGIC:
        if len(data) - size != SIGNATURE_BLOCK:
            return "signature block size"
        data = data[:size]
    if size != len(data):
        return "recorded size"
    if count > 65536 or HEADER + count * ENTRY > len(data):
        return "section count"
    if data[24:40] != xxh3_128(data[HEADER:HEADER + count * ENTRY]):
        return "table digest"
    end, sections, names = HEADER + count * ENTRY, [], set()
    for i in range(count):
        entry = data[HEADER + i * ENTRY:HEADER + (i + 1) * ENTRY]
        raw = entry[:NAME_FIELD].split(b"\0", 1)[0]
        if not raw or len(raw) > 95 or any(entry[len(raw):NAME_FIELD]):
            return f"section {i} name"
        offset, length = struct.unpack_from("<QQ", entry, NAME_FIELD)
        if offset != align(end) or offset > len(data) or length > len(data) - offset:
            return f"section {i} place"
        if any(data[end:offset]):
            return f"section {i} padding"
        if entry[NAME_FIELD + 16:] != xxh3_128(data[offset:offset + length]):
            return f"section {i} digest"
        name = raw.decode("utf-8", "replace")
        if name in names:
            return f"section {i} duplicate"
        names.add(name)
        sections.append((name, bytes(data[offset:offset + length])))
        end = offset + length
    if end != len(data):
        return "trailing bytes"
    return sections


# ---------------------------------------------------------------------------
# Package mutations: each returns (bytes, description, oracle).


def mutate_package_bytes(rng, data, sections):
    out = bytearray(data)
    count = len(sections)
    region = rng.random()
    if region < 0.3:
        lo, hi = 0, HEADER
    elif region < 0.6:
        lo, hi = HEADER, HEADER + ENTRY * count
    else:
        lo, hi = 0, len(out)
    at = rng.randrange(lo, max(lo + 1, hi))
    r = rng.random()
    if r < 0.3:
        out[at] ^= 1 << rng.randrange(8)
        what = f"a bit flipped at byte {at}"
    elif r < 0.45:
        out[at] = rng.choice([0, 0xFF, 0x80, rng.randrange(256)])
        what = f"byte {at} set to {out[at]}"
    elif r < 0.55:
        junk = bytes(rng.randrange(256) for _ in range(rng.choice([1, 8, 64])))
        out[at:at] = junk
        what = f"{len(junk)} bytes inserted at {at}"
    elif r < 0.65:
        n = rng.choice([1, 8, 64, 4096])
        del out[at:at + n]
        what = f"{n} bytes deleted at {at}"
    elif r < 0.8:
        cut = rng.choice([0, 7, 8, 63, 64, 65, at, len(out) - 1, len(out) // 2])
        del out[cut:]
        what = f"truncated to {cut} bytes"
    elif r < 0.9:
        tail = rng.choice([b"\0", b"\0" * 64, SIGNATURE_MAGIC + bytes(SIGNATURE_BLOCK - 8),
                           SIGNATURE_MAGIC + bytes(rng.randrange(256) for _ in range(SIGNATURE_BLOCK - 8)),
                           SIGNATURE_MAGIC + bytes(10), MAGIC + bytes(56)])
        out += tail
        what = f"{len(tail)} bytes appended ({tail[:8]!r}...)"
    else:
        n = rng.choice([8, 16, 128])
        a, b = rng.randrange(len(out)), rng.randrange(len(out))
        out[a:a + n], out[b:b + n] = out[b:b + n], out[a:a + n]
        what = f"{n} bytes at {a} and {b} swapped"
    return bytes(out), what


def mutate_package_header(rng, data, sections):
    out = bytearray(data)
    field = rng.choice(["version", "count", "size", "reserved", "magic"])
    if field == "version":
        struct.pack_into("<I", out, 8, rng.choice([0, 3, 0xFFFFFFFF]))
    elif field == "count":
        struct.pack_into("<I", out, 12, rng.choice([0, len(sections) - 1, len(sections) + 1, 65536, 65537,
                                                     0xFFFFFFFF]))
    elif field == "size":
        struct.pack_into("<Q", out, 16, rng.choice([0, 63, 64, len(out) - 1, len(out) + 1, 2**63, 2**64 - 1]))
    elif field == "reserved":
        out[40 + rng.randrange(8)] = rng.randrange(1, 256)
    else:
        out[rng.randrange(8)] ^= 0x20
    fix_digests(out, table=rng.random() < 0.5)
    return bytes(out), f"header {field} edited, digests fixed"


def mutate_package_table(rng, data, sections):
    out = bytearray(data)
    if not sections:
        return bytes(out), "nothing"
    i = rng.randrange(len(sections))
    entry = HEADER + i * ENTRY
    field = rng.choice(["offset", "size", "name", "swap", "digest"])
    offset, size = struct.unpack_from("<QQ", out, entry + NAME_FIELD)
    if field == "offset":
        struct.pack_into("<Q", out, entry + NAME_FIELD, rng.choice([
            0, offset + 64, offset - 64, offset + 1, len(out), 2**63, 2**64 - 64, HEADER]))
    elif field == "size":
        struct.pack_into("<Q", out, entry + NAME_FIELD + 8, rng.choice([
            0, size + 1, max(size - 1, 0), size + 64, 2**63, 2**64 - 1, len(out)]))
    elif field == "name":
        other = rng.choice(sections)[0].encode()
        name = rng.choice([b"", b"a" * 95, b"a" * 96, b"\xff\xfe", b"manifest\0junk", b"Manifest", other,
                           b"program/", b"init/../../etc", b"\n"])
        out[entry:entry + NAME_FIELD] = name[:NAME_FIELD].ljust(NAME_FIELD, b"\0")
    elif field == "swap" and len(sections) > 1:
        j = rng.choice([k for k in range(len(sections)) if k != i])
        other = HEADER + j * ENTRY
        out[entry:entry + ENTRY], out[other:other + ENTRY] = out[other:other + ENTRY], out[entry:entry + ENTRY]
    else:
        out[entry + NAME_FIELD + 16 + rng.randrange(16)] ^= 1
    fix_digests(out, table=True, sections=field in ("offset", "size") and rng.random() < 0.5)
    return bytes(out), f"table entry {i} ({sections[i][0]}): {field} edited, digests fixed"


def elf_mutation(rng, obj):
    """An ELF object with its header, section headers, symbols or relocations
    edited (never its code or data bytes)."""
    out = bytearray(obj)
    if len(out) < 64 or out[:4] != b"\x7fELF" or out[4] != 2:
        cut = rng.randrange(len(out) + 1)
        return bytes(out[:cut]), f"not ELF (a device binary): cut to {cut} of {len(out)} bytes"
    shoff = struct.unpack_from("<Q", out, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", out, 0x3A)
    headers = []
    for i in range(shnum):
        at = shoff + i * 64
        if at + 64 > len(out):
            break
        name, kind, flags, addr, offset, size, link, info, addralign, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", out, at)
        headers.append((at, kind, offset, size, entsize))
    r = rng.random()
    if r < 0.25 or not headers:
        field = rng.choice([(0x04, "<B", [1, 3, 0]), (0x05, "<B", [2, 0]), (0x10, "<H", [2, 3, 0]),
                            (0x12, "<H", [0xB7, 3, 0, 0xFFFF]), (0x28, "<Q", [0, len(out), 2**63, shoff + 1]),
                            (0x3A, "<H", [0, 1, 63, 65, 0xFFFF]), (0x3C, "<H", [0, shnum + 1, 0xFFFF]),
                            (0x3E, "<H", [shnum, 0xFFFF, 0])])
        at, fmt, values = field
        struct.pack_into(fmt, out, at, rng.choice(values))
        return bytes(out), f"ELF header field at {at:#x} edited"
    at, kind, offset, size, entsize = rng.choice(headers)
    if r < 0.55:
        field = rng.choice([(4, "<I", [0, 1, 2, 3, 4, 8, 9, 0x6FFFFFFF]), (8, "<Q", [0, 0xFFFFFFFFFFFFFFFF, 4]),
                            (24, "<Q", [len(out), 2**63, offset + 1, 0]), (32, "<Q", [0, size + 1, 2**63, len(out)]),
                            (40, "<I", [0, shnum, 0xFFFFFFFF]), (44, "<I", [0, shnum, 0xFFFFFFFF]),
                            (48, "<Q", [0, 3, 2**62, 1 << 40]), (56, "<Q", [0, 1, 23, 2**63])])
        off, fmt, values = field
        struct.pack_into(fmt, out, at + off, rng.choice(values))
        return bytes(out), f"section header at {at:#x}: field +{off} edited"
    # Entries of a symbol table (2) or relocation section (4, RELA).
    tables = [h for h in headers if h[1] in (2, 4) and h[4] in (24,) and h[2] + h[3] <= len(out) and h[3] >= 24]
    if not tables:
        return bytes(out), "no symbol or relocation table"
    at, kind, offset, size, entsize = rng.choice(tables)
    entry = offset + rng.randrange(size // entsize) * entsize
    if kind == 2:  # Elf64_Sym: name u32, info u8, other u8, shndx u16, value u64, size u64
        off, fmt, values = rng.choice([(0, "<I", [0xFFFFFFFF, 1 << 20]), (4, "<B", [0x12, 0x10, 0x20, 0xFF, 0x1A]),
                                       (6, "<H", [0, 0xFFF1, 0xFFF2, 0xFFFF, 200]),
                                       (8, "<Q", [2**63, 2**64 - 1, 1 << 40]), (16, "<Q", [0, 2**63])])
        struct.pack_into(fmt, out, entry + off, rng.choice(values))
        return bytes(out), f"symbol at {entry:#x}: field +{off} edited"
    # Elf64_Rela: offset u64, info u64 (sym << 32 | type), addend i64
    off, fmt, values = rng.choice([(0, "<Q", [2**63, 2**64 - 8, 1 << 32]), (8, "<I", [0, 0xFF, 42, 0xFFFFFFFF]),
                                   (12, "<I", [0, 0xFFFFFF, 1 << 20]), (16, "<q", [2**62, -2**62])])
    struct.pack_into(fmt, out, entry + off, rng.choice(values))
    return bytes(out), f"relocation at {entry:#x}: field +{off} edited"


def manifest_mutation(rng, doc, ctx):
    """Structural edits of a manifest, with the values its fields take."""
    r = rng.random()
    programs = doc.get("programs") if isinstance(doc, Obj) else None
    if r < 0.3 and isinstance(programs, list) and programs:
        p = rng.choice(programs)
        if isinstance(p, Obj):
            key = rng.choice(["artifact", "device", "name"])
            value = {"artifact": rng.choice(["elf_object", "shared_library", "source", "opencl_binary", "cubin", "ptx",
                                             "unknown", ""]),
                     "device": rng.choice(DEVICES), "name": rng.choice(ctx["names"] + ["nonexistent", ""])}[key]
            p.set(key, value)
            return f"manifest programs[].{key} = {value!r}"
    if r < 0.5 and isinstance(doc.get("cpu"), Obj):
        cpu = doc.get("cpu")
        key = rng.choice(["target_triple", "target_features", "abi_version", "backend", "target_cpu"])
        value = {"target_triple": rng.choice(["aarch64-unknown-linux-gnu", "", "x86_64", "riscv64-linux"]),
                 "target_features": rng.choice([["+avx512f"], ["+amx-tile", "+avx512fp16"], ["-sse2"], [""], [1],
                                                "+avx2", ["+nonexistent"]]),
                 "abi_version": rng.choice([0, 2, -1, 2**64, "1"]),
                 "backend": rng.choice(["dlopen", "clang", "llvm", "", "gcc"]),
                 "target_cpu": rng.choice(["", "sapphirerapids", "x" * 1000])}[key]
        cpu.set(key, value)
        return f"manifest cpu.{key} = {short(value)}"
    if r < 0.65:
        key = rng.choice(["format", "buffers", "expected", "variables", "devices", "opencl", "svod_version"])
        value = {"format": rng.choice([0, 3, "1", None]),
                 "buffers": rng.choice([[], ["nonexistent"], ctx["names"][:3], ["x", "x"]]),
                 "expected": rng.choice([[], ["nonexistent"], ctx["names"][:2]]),
                 "variables": rng.choice([Obj([["N", 2**63]]), Obj([["nonexistent", 1]]), Obj([["N", -1]]), []]),
                 "devices": rng.choice([Obj(), Obj([["CL:0", Obj()]]), []]),
                 "opencl": Obj([["CL:0", Obj([["backend", "opencl"]])]]),
                 "svod_version": rng.choice(["", "99.0.0", 1])}[key]
        doc.set(key, value)
        return f"manifest {key} = {short(value)}"
    mutation = weighted(rng, [(m_delete_key, 4), (m_duplicate_key, 2), (m_number, 3), (m_string, 3),
                              (m_retype, 2), (m_deep, 1), (m_key_name, 1)])
    return mutation(rng, doc, ctx)


def expect_tamper(rng, data, fmt="<d"):
    out = bytearray(data)
    count = len(out) // 8
    if not count:
        return None
    i = rng.randrange(count)
    old = struct.unpack_from(fmt, out, i * 8)[0]
    struct.pack_into(fmt, out, i * 8, old * 2 + 1000 if old == old else 1000.0)
    return bytes(out)


# ---------------------------------------------------------------------------
# Output files are the one thing svod writes: keep every name inside the
# mutant's own folder.

SAFE_OUTPUT_NAMES = ["out.npy", "", ".", "..", "sub/out.npy", "dir", "fifo", "loop", "x.npy", "kernels",
                     "../up.npy", "a" * 300 + ".npy", "out.npy\x00x", "\u00e9.npy"]
SAFE_OUTPUT = re.compile(r"^(\.\./)?([A-Za-z0-9_\u00e9][A-Za-z0-9_.\u00e9-]*)?(/[A-Za-z0-9_][A-Za-z0-9_.-]*)?$")


def outputs_safe(doc):
    """False when an output would be written outside the mutant's folder."""
    for _, _, value, path in walk(doc):
        if len(path) == 3 and path[0] == "outputs" and path[2] == "npy":
            if not isinstance(value, str):
                continue
            if value in SAFE_OUTPUT_NAMES:
                continue
            if not SAFE_OUTPUT.match(value) or value.startswith("/") or "/../" in value or value.count("..") > 1:
                return False
    return True


def text_safe(text):
    """For text Python cannot parse: no absolute or far-up output names."""
    return not re.search(rb'"npy"\s*:\s*"(/|\.\./\.\.)', text)


# ---------------------------------------------------------------------------
# Mutants.


class Mutant:
    def __init__(self, kind, index, base, what, oracle, data, args, env):
        self.kind, self.index, self.base, self.what = kind, index, base, what
        self.oracle, self.data, self.env = oracle, data, env
        self.family = kind  # what it counts as: a plan packed by svod pack is still a plan
        self.pack = False  # plans: `svod pack` it, then run the package
        # The base's own flags (--ranks) unless the mutation chose others.
        base_args = getattr(base, "args", [])
        self.args = args if "--ranks" in args else base_args + args

    @property
    def name(self):
        packed = "-packed" if self.kind != self.family else ""
        return f"{self.family}-{self.index:04d}-{self.base.name}{packed}"


class Base:
    """One real plan: its folder copied into the work folder, its document,
    its package, and what an unmutated run prints."""

    def __init__(self, name, plan, folder, source):
        self.name, self.plan, self.folder, self.source = name, plan, folder, source
        self.text = plan.read_text()
        self.doc = parse_json(self.text)
        self.package = None
        self.args = []
        self.sums = {}
        self.package_sums = {}


def json_copy(node):
    if isinstance(node, Obj):
        return Obj([[k, json_copy(v)] for k, v in node])
    if isinstance(node, list):
        return [json_copy(v) for v in node]
    return node


def cli_flags(rng, doc, neutral_only=False):
    """Flags for `svod run`, some of which change nothing."""
    flags, env = [], {}
    r = rng.random()
    if r < 0.15:
        flags.append("--sequential")
    elif r < 0.25:
        flags += ["--repeat", str(rng.choice([2, 3]))]
    if rng.random() < 0.15:
        env["SVOD_THREADS"] = str(rng.choice([1, 64]))
    if neutral_only:
        return flags, env
    variables = section(doc, "variables")
    if variables and rng.random() < 0.2:
        name = rng.choice(variables.keys() + ["nonexistent", "rank"])
        value = rng.choice(["0", "1", "-1", "256", "257", "9223372036854775807", "99999999999999999999", "1.5", ""])
        flags += ["--var", f"{name}={value}"]
    if rng.random() < 0.1:
        flags += ["--ranks", str(rng.choice([2, 3]))]
    if rng.random() < 0.05:
        flags += ["--cpu-compiler", rng.choice(["clang", "llvm", "dlopen"])]
    if rng.random() < 0.3:
        env["SVOD_CHECK"] = "memory"
    return flags, env


def make_plan_mutant(rng, index, bases, sanitized):
    for _ in range(50):
        base = rng.choice(bases)
        doc = json_copy(base.doc)
        ctx = context(doc, base.folder)
        r = rng.random()
        oracle, indent, escape = "none", rng.choice([None, None, 2]), None
        flags, env, pack = [], {}, False
        if r < 0.68:
            whats = []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                what = weighted(rng, STRUCTURAL)(rng, doc, ctx)
                if what:
                    whats.append(what)
            if not whats:
                continue
            what = "; ".join(whats)
            flags, env = cli_flags(rng, doc)
            pack = rng.random() < 0.15
        elif r < 0.8:
            data, what = mutate_text(rng, dump(doc, indent).encode("utf-8", "surrogatepass"))
            if not text_safe(data):
                continue
            try:
                if not outputs_safe(parse_json(data.decode())):
                    continue
            except (ValueError, UnicodeDecodeError):
                pass
            return Mutant("plan", index, base, "text: " + what, "none", data, *cli_flags(rng, doc))
        elif r < 0.9:
            what = neutral(rng, doc, base)
            if what is None:
                continue
            if what.startswith("strings"):
                escape = escaped(rng)
            elif what == "indented":
                indent = rng.choice([1, 4, 8])
            oracle = "same"
            flags, env = cli_flags(rng, doc, neutral_only=True)
        else:
            what = tamper_expectation(rng, doc, base.folder, index)
            if what is None:
                continue
            oracle = "fail"
        if not outputs_safe(doc):
            continue
        if sanitized and too_big(doc):
            continue
        data = dump(doc, indent, escape).encode("utf-8", "surrogatepass")
        mutant = Mutant("plan", index, base, what, oracle, data, flags, env)
        mutant.pack = pack
        return mutant
    raise RuntimeError(f"plan mutant {index}: no applicable mutation")


def too_big(doc):
    """More than 1 GiB of buffers (under a sanitizer no address-space limit
    contains what a fill would write)."""
    total = 0
    for _, spec in section(doc, "buffers"):
        if not isinstance(spec, Obj):
            continue
        count = spec.get("count")
        shape = spec.get("shape")
        if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            count = 1
            for d in shape:
                count *= d
        if isinstance(count, int) and 0 < count * 8 <= 2**41:
            total += count * 8
    return total > 2**30


def make_package_mutant(rng, index, bases, sanitized):
    for _ in range(50):
        base = rng.choice([b for b in bases if b.package])
        data = base.package
        sections = read_package(data)
        oracle = "none"
        r = rng.random()
        names = [n for n, _ in sections]
        if r < 0.22:
            out, what = mutate_package_bytes(rng, data, sections)
        elif r < 0.3:
            out, what = mutate_package_header(rng, data, sections)
        elif r < 0.4:
            out, what = mutate_package_table(rng, data, sections)
        else:
            sections = [list(s) for s in sections]
            kind = rng.random()
            if kind < 0.15:  # the manifest
                i = names.index("manifest")
                doc = parse_json(sections[i][1].decode())
                ctx = context(base.doc, base.folder)
                ctx["names"] += names
                what = manifest_mutation(rng, doc, ctx)
                if not what:
                    continue
                sections[i][1] = dump(doc).encode("utf-8", "surrogatepass")
                what = "manifest: " + what
            elif kind < 0.4:  # the plan inside
                i = names.index("plan")
                doc = parse_json(sections[i][1].decode())
                ctx = context(doc, base.folder)
                whats = [w for w in (weighted(rng, STRUCTURAL)(rng, doc, ctx) for _ in range(rng.choice([1, 1, 2])))
                         if w]
                if not whats or not outputs_safe(doc) or (sanitized and too_big(doc)):
                    continue
                sections[i][1] = dump(doc).encode("utf-8", "surrogatepass")
                what = "plan section: " + "; ".join(whats)
            elif kind < 0.55:  # a compiled CPU program
                # Device binaries (OpenCL, CUDA) go to the driver as they are: a forged one is code
                # svod cannot judge (docs/SECURITY.md), like a kernel's meaning; ELF objects its own
                # loader checks are fair game.
                programs = [k for k, n in enumerate(names) if n.startswith("program/")
                            and sections[k][1][:4] == b"\x7fELF"]
                if not programs:
                    continue
                i = rng.choice(programs)
                r2 = rng.random()
                if r2 < 0.6:
                    sections[i][1], how = elf_mutation(rng, sections[i][1])
                elif r2 < 0.8:
                    other = rng.choice(programs)
                    sections[i][1] = sections[other][1]
                    how = f"replaced by {names[other]}'s object"
                else:
                    sections[i][1] = rng.choice([b"", b"\x7fELF", sections[i][1][:rng.randrange(
                        len(sections[i][1]) + 1)], bytes(rng.randrange(256) for _ in range(512))])
                    how = f"replaced by {len(sections[i][1])} bytes"
                what = f"{names[i]}: {how}"
            elif kind < 0.65:  # buffer data
                inits = [k for k, n in enumerate(names) if n.startswith("init/")]
                if not inits:
                    continue
                i = rng.choice(inits)
                old = sections[i][1]
                sections[i][1] = rng.choice([b"", old[:-1], old + b"\0", old[:len(old) // 2], old * 2,
                                             bytes(len(old)), b"\xff" * len(old)])
                what = f"{names[i]}: {len(old)} -> {len(sections[i][1])} bytes"
                # A buffer's data is exactly its size: anything else is refused.
                oracle = "reject" if len(sections[i][1]) != len(old) else "none"
            elif kind < 0.75:  # expected values
                expects = [k for k, n in enumerate(names) if n.startswith("expect/")]
                if not expects:
                    continue
                i = rng.choice(expects)
                old = sections[i][1]
                if rng.random() < 0.6:
                    tampered = expect_tamper(rng, old)
                    if tampered is None:
                        continue
                    sections[i][1] = tampered
                    what = f"{names[i]}: one expected value changed"
                    oracle = "fail"
                else:
                    sections[i][1] = rng.choice([b"", old[:-8], old + bytes(8), old[:-1]])
                    what = f"{names[i]}: {len(old)} -> {len(sections[i][1])} bytes"
                    # Expected values for every element, never fewer or more.
                    oracle = "reject"
            elif kind < 0.85:  # sections added, removed, renamed
                r2 = rng.random()
                if r2 < 0.35:
                    name = rng.choice(["unknown", "program/nonexistent", "init/nonexistent", "expect/nonexistent",
                                       "a" * 95, "plan2", "\u00e9", "manifest/x"])
                    sections.insert(rng.randrange(len(sections) + 1), [name, rng.choice([b"", b"{}", b"x" * 100])])
                    what = f"section {name!r} added"
                elif r2 < 0.7:
                    i = rng.randrange(len(sections))
                    what = f"section {names[i]!r} removed"
                    del sections[i]
                else:
                    i = rng.randrange(len(sections))
                    sections[i][0] = rng.choice(["manifest", "plan", names[i].upper(), names[i] + "/", "x"])
                    what = f"section {names[i]!r} renamed to {sections[i][0]!r}"
            elif kind < 0.93:  # nothing changes
                rng.shuffle(sections)
                plan = next(s for s in sections if s[0] == "plan")
                plan[1] = dump(parse_json(plan[1].decode()), rng.choice([None, 2]), escaped(rng)).encode(
                    "utf-8", "surrogatepass")
                what = "sections reordered, plan re-indented with \\u escapes"
                oracle = "same"
            else:  # an expectation in the plan inside
                i = names.index("plan")
                doc = parse_json(sections[i][1].decode())
                what = tamper_expectation(rng, doc, base.folder, f"p{index}")
                if what is None or "npy" in what:
                    continue
                sections[i][1] = dump(doc).encode("utf-8", "surrogatepass")
                what = "plan section: " + what
                oracle = "fail"
            out = write_package([(n, d) for n, d in sections])
        flags, env = cli_flags(rng, base.doc, neutral_only=oracle == "same")
        if oracle == "none" and rng.random() < 0.15:
            env["SVOD_COMPILE"] = "0"
        if read_package_plan_unsafe(out):
            continue
        return Mutant("package", index, base, what, oracle, out, flags, env)
    raise RuntimeError(f"package mutant {index}: no applicable mutation")


def read_package_plan_unsafe(data):
    """True when the mutant's plan section would write outside its folder."""
    sections = read_package(data)
    if isinstance(sections, str):
        return not text_safe(bytes(data))
    for name, text in sections:
        if name == "plan":
            try:
                return not outputs_safe(parse_json(text.decode()))
            except (ValueError, UnicodeDecodeError):
                return not text_safe(text)
    return False


# ---------------------------------------------------------------------------
# Running and classifying.

ERROR_LINE = re.compile(r"^(\[rank \d+\] )?svod( [a-z]+)?: error \(([a-z ]+)\): \S")
CONTINUATION = re.compile(r"^(\[rank \d+\] )?  \| ")
MISMATCH_LINE = re.compile(r"^(\[rank \d+\] )?svod run: \d+ outputs? did not match the expectation$")
OUTPUT_LINE = re.compile(r"^(\[rank \d+\] )?(?P<name>.+?): (?P<dtype>[a-z0-9]+) \[[^\]]*\] \[.*\]  sum \S+  "
                         r"xxh3 (?P<hash>[0-9a-f]{16})$")
KERNEL_REPORTS = ("svod: kernel fault:", "called exit() while running")
SANITIZERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "WARNING: ThreadSanitizer",
              "ERROR: MemorySanitizer")
TIMEOUT_LINE = re.compile(r"svod run: .*: timed out after \S+ s \(--timeout\) (?P<where>.*)$", re.M)
# A kernel --timeout stopped: the run fails naming it.
SLACK_CANARY_LINE = re.compile(r"svod: a buffer of \d+ bytes at 0x[0-9a-f]+ being freed was written just outside its range")
STOPPED_LINE = re.compile(r"svod run: error \(timeout\): .*kernel stopped: (?P<what>.*): the run timed out after \S+ s "
                          r"\(--timeout\)", re.M)
KERNEL_EXIT_STATUS = 70
KERNEL_FAULT_STATUS = 3
# Lines that are not svod's but end up on its stderr.
KNOWN_NOISE = ("TBB Warning:",)
# What a driver prints itself and svod cannot keep off the process's stderr:
# PoCL's compiler ends a failed OpenCL build with clang's summary line, before
# svod's own error (which carries the whole build log).
DRIVER_OUTPUT = re.compile(r"^\d+ (?:warning|error)s? generated\.$")


class Result:
    def __init__(self, status, out, err, seconds, timed_out=False):
        self.status, self.out, self.err, self.seconds, self.timed_out = status, out, err, seconds, timed_out


def limit_resources(sanitized):
    def apply():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if not sanitized:
            resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
    return apply


def run_svod(svod, target, args, env, cwd, timeout, sanitized, packed=None):
    """`svod run TARGET --timeout T ARGS`, or `svod pack TARGET -o PACKED`."""
    if packed:
        command = [str(svod), "pack", str(target), "-o", str(packed)]
    else:
        command = [str(svod), "run", str(target), "--timeout", str(timeout)] + args
    start = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True,
                               preexec_fn=limit_resources(sanitized))
    try:
        out, err = process.communicate(timeout=timeout * 2 + 20)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        timed_out = True
    return Result(process.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                  time.monotonic() - start, timed_out)


def printed_outputs(out):
    sums = {}
    for line in out.splitlines():
        m = OUTPUT_LINE.match(line)
        if m:
            sums.setdefault(m.group("name"), m.group("hash"))
    return sums


def declared_outputs(doc):
    """(output names, how many have an expectation) a plan declares."""
    outputs = doc.get("outputs") if isinstance(doc, Obj) else None
    if not isinstance(outputs, Obj):
        return [], 0
    last = {}
    for name, spec in outputs:
        last[name] = spec
    return list(last), sum(1 for s in last.values() if isinstance(s, Obj) and s.get("expect") is not None)


def classify(mutant, result, base_sums):
    """(class, detail): class is ran, mismatch, rejected, kernel or a failure.
    Known noise on stderr is a failure of its own when nothing worse is."""
    result.err = "\n".join(line for line in result.err.split("\n") if not DRIVER_OUTPUT.match(line))
    noise = [line for line in result.err.split("\n") if any(line.startswith(n) for n in KNOWN_NOISE)]
    if noise:
        result.err = "\n".join(line for line in result.err.split("\n") if line not in noise)
    kind, detail = classify_run(mutant, result, base_sums)
    if noise and not kind.startswith("FAIL"):
        return "FAIL-noise", f"{kind} ({detail[:100]}), but stderr has: {noise[0][:200]}"
    return kind, detail


def classify_run(mutant, result, base_sums):
    err, out, status = result.err, result.out, result.status
    if result.timed_out:
        return "FAIL-hang", f"no exit {result.seconds:.0f} s after the start (--timeout did not end it)"
    if any(s in err for s in SANITIZERS):
        if any(k in err for k in KERNEL_REPORTS):
            return "kernel", "a kernel's fault, reported by svod, then by the sanitizer"
        return "FAIL-sanitizer", first_line(err, SANITIZERS)
    if status < 0 or status in (128 + 6, 128 + 11, 128 + 7, 128 + 8, 128 + 4):
        if any(k in err for k in KERNEL_REPORTS):
            return "kernel", f"signal {-status}: a kernel's fault, reported by svod"
        return "FAIL-crash", f"status {status} ({signal_name(status)}) with no kernel fault report"
    if status == KERNEL_EXIT_STATUS and "called exit() while running" in err:
        return "kernel", "a kernel called exit()"
    if status == 124:
        if m := STOPPED_LINE.search(err):
            return "kernel", "--timeout stopped a kernel: " + m.group("what")[:300]
        m = TIMEOUT_LINE.search(err)
        # A kernel still running is what the others (ops, ranks) wait for.
        if m and m.group("where").startswith("running ") and " run " in m.group("where"):
            return "kernel", "--timeout while a kernel ran: " + m.group("where")[:300]
        return "FAIL-hang", m.group(0) if m else "status 124 without svod's timeout line"
    lines = [line for line in err.split("\n") if line.strip()]  # names may hold \r
    if status == 0:
        # A kernel that wrote into the few bytes between a buffer's end and its
        # guard page: the slack's canary names it when the buffer is freed.
        if lines and all(SLACK_CANARY_LINE.match(line) for line in lines):
            return "kernel", "a kernel wrote into a buffer's alignment slack: " + lines[0][:300]
        if lines:
            return "FAIL-noise", "exit 0 with stderr: " + lines[0][:300]
        if mutant.oracle == "fail":
            return "FAIL-wrong", "a tampered expectation passed (exit 0)"
        if mutant.oracle == "reject":
            return "FAIL-wrong", "ran (exit 0) what must be refused"
        doc = mutant_plan_doc(mutant)
        if doc is None:
            return "FAIL-lenient", "ran a " + ("package the format forbids: " + str(read_package(mutant.data))
                                            if mutant.kind == "package" else "plan Python's json cannot parse")
        names, expects = declared_outputs(doc)
        printed = printed_outputs(out)
        missing = [n for n in names if n not in printed]
        ok = len(re.findall(r"^(\[rank \d+\] )?  expect: ok", out, re.M))
        if missing:
            return "FAIL-silent", f"exit 0 without the outputs {missing[:5]}"
        if ok < expects:
            return "FAIL-silent", f"exit 0 with {ok} expectations checked of {expects}"
        # Names may have been renamed and outputs reordered: the checksums
        # must be the same ones.
        if mutant.oracle == "same" and base_sums is not None and sorted(printed.values()) != sorted(base_sums.values()):
            changed = [n for n, h in printed.items() if h not in base_sums.values()]
            return "FAIL-wrong", f"results changed by a mutation that changes nothing: {changed[:5]}"
        return "ran", f"{len(names)} outputs, {ok} expectations"
    error_lines = [line for line in lines if ERROR_LINE.match(line)]
    unknown = [line for line in lines if not (ERROR_LINE.match(line) or CONTINUATION.match(line)
                                              or MISMATCH_LINE.match(line))]
    if unknown:
        return "FAIL-noise", f"status {status}, stderr not a clean error: {unknown[0][:300]}"
    if any(ERROR_LINE.match(line).group(3) == "internal" for line in error_lines):
        return "FAIL-internal", error_lines[0][:300]
    if status == 1:
        # (With --ranks only rank 0's values are shown: another rank's
        # mismatch is its stderr line alone.)
        if not any(MISMATCH_LINE.match(line) for line in lines) or (
                "expect: FAILED" not in out and "--ranks" not in mutant.args):
            return "FAIL-noise", "status 1 without the mismatch report"
        if mutant.oracle == "same":
            return "FAIL-wrong", "expectations failed after a mutation that changes nothing"
        if mutant.oracle == "reject":
            return "FAIL-wrong", "ran (status 1: " + next(line for line in lines if MISMATCH_LINE.match(line)) + \
                ") what must be refused"
        return "mismatch", next(line for line in lines if MISMATCH_LINE.match(line))
    if status == KERNEL_FAULT_STATUS:
        if not any(ERROR_LINE.match(line).group(3) == "kernel fault" for line in error_lines):
            return "FAIL-noise", "status 3 without a kernel fault error line"
        return "kernel", "a kernel faulted and was stopped: " + error_lines[0][:200]
    if status == 2:
        if not error_lines:
            return "FAIL-noise", "status 2 without an error line"
        ranks = max(1, int(mutant.args[mutant.args.index("--ranks") + 1]) if "--ranks" in mutant.args else 1)
        if len(error_lines) > ranks:
            return "FAIL-noise", f"{len(error_lines)} error lines: " + " / ".join(e[:120] for e in error_lines[:3])
        if mutant.oracle == "same":
            return "FAIL-wrong", "refused after a mutation that changes nothing: " + error_lines[0][:300]
        return "rejected", error_lines[0][:300]
    return "FAIL-status", f"status {status}: " + (lines[0][:300] if lines else "no stderr")


def classify_pack(result):
    """How `svod pack` of a mutated plan ended: packed, rejected or a failure."""
    lines = [line for line in result.err.split("\n") if line.strip()]
    if result.timed_out:
        return "FAIL-hang", "svod pack did not end"
    if any(s in result.err for s in SANITIZERS):
        return "FAIL-sanitizer", "svod pack: " + first_line(result.err, SANITIZERS)
    if result.status == 0:
        return ("packed", "") if not lines else ("FAIL-noise", "svod pack: exit 0 with stderr: " + lines[0][:300])
    if result.status != 2:
        return "FAIL-crash", f"svod pack: status {result.status} ({signal_name(result.status)})"
    errors = [line for line in lines if ERROR_LINE.match(line)]
    if len(errors) != 1 or any(not (ERROR_LINE.match(line) or CONTINUATION.match(line)) for line in lines):
        return "FAIL-noise", "svod pack: stderr not one clean error: " + " / ".join(x[:120] for x in lines[:3])
    if ERROR_LINE.match(errors[0]).group(3) == "internal":
        return "FAIL-internal", errors[0][:300]
    return "rejected", errors[0][:300]


def mutant_plan_doc(mutant):
    if mutant.kind == "plan":
        try:
            return parse_json(mutant.data.decode().removeprefix("\ufeff"))
        except (ValueError, UnicodeDecodeError):
            return None
    sections = read_package(mutant.data)
    if isinstance(sections, str):
        return None
    for name, text in sections:
        if name == "plan":
            try:
                return parse_json(text.decode())
            except (ValueError, UnicodeDecodeError):
                return None
    return None


def first_line(text, needles):
    for line in text.splitlines():
        if any(n in line for n in needles):
            return line.strip()[:300]
    return text.strip().splitlines()[0][:300] if text.strip() else ""


def signal_name(status):
    number = -status if status < 0 else status - 128
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def short(value, limit=60):
    text = dump(value) if not isinstance(value, str) or isinstance(value, Raw) else json.dumps(value)
    return text if len(text) <= limit else text[:limit] + f"...({len(text)} chars)"


def fmt_path(path):
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p)) for i, p in enumerate(path))


# ---------------------------------------------------------------------------
# The campaign.


class Campaign:
    def __init__(self, options):
        self.options = options
        self.svod = pathlib.Path(options.svod).resolve()
        self.work = pathlib.Path(options.work).resolve()
        self.keep = pathlib.Path(options.keep).resolve() if options.keep else self.work / "failures"
        binaries = [self.svod.read_bytes()] + [p.read_bytes() for p in (self.svod.parent / "runtime").glob(
            "libsvod_runtime.so*") if not p.is_symlink()]
        self.sanitized = any(b"__asan_init" in b or b"__tsan_init" in b for b in binaries[:1])
        self.checked_mode = any(b"SVOD_CHECK" in b for b in binaries)
        self.env = dict(os.environ)
        # Compiled objects, PoCL's too, go to the work folder.
        self.env.update({"SVOD_CACHE_DIR": str(self.work / "cache"), "POCL_CACHE_DIR": str(self.work / "pocl-cache"),
                         "SVOD_COMM_TIMEOUT": "20"})
        for key in ("SVOD_CACHE", "SVOD_CHECK", "SVOD_COMPILE", "SVOD_DEBUG", "SVOD_PROFILE", "SVOD_THREADS",
                    "SVOD_CPU_COMPILER", "SVOD_CPU_BACKEND", "SVOD_TRUSTED_KEYS"):
            self.env.pop(key, None)
        self.counts = {}
        self.failures = []
        self.lock = threading.Lock()
        self.bases = []

    def log(self, text):
        print(text, flush=True)

    def prepare(self):
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "runs").mkdir(exist_ok=True)
        plans = sorted({p for g in PLAN_GLOBS for p in ROOT.glob(g)})
        for plan in plans:
            if '"svod_plan"' not in plan.read_text():
                continue
            tag = plan.parent.relative_to(ROOT).as_posix().replace("/", "-")
            folder = self.work / "bases" / tag
            if not folder.exists():
                shutil.copytree(plan.parent, folder, ignore=shutil.ignore_patterns("*.py", "*.md", "*.cpp", "*.txt"))
            name = plan.parent.name if plan.name == "plan.json" else plan.stem
            base = Base(name, folder / plan.name, folder, plan.parent)
            # Plans for several ranks run on as many as they need.
            for base.args in ([], ["--ranks", "2"], ["--ranks", "4"]):
                result = run_svod(self.svod, base.plan, base.args, self.env, folder, self.options.timeout,
                                  self.sanitized)
                if result.status == 0 or "ranks" not in result.err:
                    break
            if result.status != 0:
                self.log(f"  base {name}: skipped, it does not run here: {first_line(result.err, ['error'])}")
                continue
            base.sums = printed_outputs(result.out)
            package = self.work / "bases" / f"{name}.svodpkg"
            packed = subprocess.run([str(self.svod), "pack", str(base.plan), "-o", str(package)], env=self.env,
                                    stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if packed.returncode == 0:
                result = run_svod(self.svod, package, base.args, self.env, folder, self.options.timeout,
                                  self.sanitized)
                if result.status == 0 and not isinstance(read_package(package.read_bytes()), str):
                    base.package = package.read_bytes()
                    base.package_sums = printed_outputs(result.out)
                else:
                    self.log(f"  base {name}: its package does not run: {first_line(result.err, ['error'])}")
            else:
                self.log(f"  base {name}: could not pack: {packed.stderr.strip()[:200]}")
            self.bases.append(base)
        self.log(f"{len(self.bases)} plans, {sum(1 for b in self.bases if b.package)} packages: "
                 + ", ".join(b.name + (" (+package)" if b.package else "") for b in self.bases))
        if not self.bases:
            raise RuntimeError("no plan runs here; is svod built?")

    def mutants(self, kind, count):
        seed = self.options.seed
        for index in range(count):
            rng = random.Random(f"{seed}/{kind}/{index}")
            maker = make_plan_mutant if kind == "plan" else make_package_mutant
            yield maker(rng, index, self.bases, self.sanitized)

    def folder_for(self, mutant):
        """A fresh copy of the base's folder, with special files to point at."""
        folder = self.work / "runs" / mutant.name
        if folder.exists():
            shutil.rmtree(folder)
        shutil.copytree(mutant.base.folder, folder)
        (folder / "dir").mkdir(exist_ok=True)
        (folder / "empty.npy").write_bytes(b"")
        os.mkfifo(folder / "fifo")
        os.symlink("loop", folder / "loop")
        npys = sorted(folder.glob("*.npy"))
        if npys:
            os.symlink(npys[0].name, folder / "link_x.npy")
        return folder

    def execute(self, mutant):
        folder = self.folder_for(mutant)
        target = folder / ("mutant.json" if mutant.kind == "plan" else "mutant.svodpkg")
        target.write_bytes(mutant.data)
        env = dict(self.env)
        env.update(mutant.env)
        if mutant.pack:
            packed = folder / "packed.svodpkg"
            result = run_svod(self.svod, target, [], env, folder, self.options.timeout, self.sanitized, packed)
            kind, detail = classify_pack(result)
            if kind != "packed":
                return self.record(mutant, kind, detail, result, folder)
            # Run and check the package as a package; the plan's oracle holds.
            plan = mutant
            mutant = Mutant("package", plan.index, plan.base, plan.what + " (packed, then run)", plan.oracle,
                            packed.read_bytes(), [], plan.env)
            mutant.args, mutant.family, mutant.plan, target = plan.args, "plan", plan, packed
        result = run_svod(self.svod, target, mutant.args, env, folder, self.options.timeout, self.sanitized)
        base_sums = mutant.base.sums if mutant.family == "plan" else mutant.base.package_sums
        kind, detail = classify(mutant, result, base_sums)
        if kind in ("FAIL-crash", "FAIL-sanitizer") and self.checked_mode and "SVOD_CHECK" not in mutant.env:
            # A kernel that writes past a buffer the mutation shrank corrupts
            # memory and the crash comes later, unattributed; guard pages
            # around every buffer make it fault in the kernel, where svod
            # names it.
            env["SVOD_CHECK"] = "memory"
            again = run_svod(self.svod, target, mutant.args, env, folder, self.options.timeout, self.sanitized)
            if classify(mutant, again, base_sums)[0] == "kernel":
                kind, detail = "kernel", "past a buffer's end: faults in the kernel under SVOD_CHECK=memory"
        return self.record(mutant, kind, detail, result, folder)

    def record(self, mutant, kind, detail, result, folder):
        with self.lock:
            self.counts.setdefault(mutant.family, {}).setdefault(kind, 0)
            self.counts[mutant.family][kind] += 1
            with open(self.work / "results.jsonl", "a") as f:
                f.write(json.dumps({"mutant": mutant.name, "class": kind, "detail": detail, "mutation": mutant.what,
                                    "args": mutant.args, "env": mutant.env, "status": result.status,
                                    "seconds": round(result.seconds, 2)}) + "\n")
            if kind.startswith("FAIL"):
                self.keep_failure(mutant, kind, detail, result)
                if getattr(mutant, "plan", None):
                    self.keep_failure(mutant.plan, kind, detail + " (the package it packed to)", result)
        shutil.rmtree(folder, ignore_errors=True)
        return kind, detail, result

    def keep_failure(self, mutant, kind, detail, result):
        self.keep.mkdir(parents=True, exist_ok=True)
        suffix = ".json" if mutant.kind == "plan" else ".svodpkg"
        kept = self.keep / (mutant.name + suffix)
        data = mutant.data
        if mutant.kind == "plan":
            data = with_paths_from(data, mutant.base.folder, mutant.base.source, self.keep)
        kept.write_bytes(data)
        if mutant.args or mutant.env or mutant.oracle != "none":
            kept.with_suffix(".args").write_text(
                json.dumps({"args": mutant.args, "env": mutant.env, "oracle": mutant.oracle}) + "\n")
        env = " ".join(f"{k}={v}" for k, v in sorted(mutant.env.items()))
        with open(self.keep / "failures.txt", "a") as f:
            f.write(f"{kept.name}: {kind}: {detail}\n  mutation: {mutant.what}\n"
                    f"  run: {env + ' ' if env else ''}svod run {kept.name} {' '.join(mutant.args)}\n"
                    f"  status {result.status}, {result.seconds:.1f} s; stderr: "
                    f"{result.err.strip()[-600:]!r}\n\n")
        self.failures.append((mutant, kind, detail))
        self.log(f"  {kind}: {mutant.name}: {detail}\n    mutation: {mutant.what}")

    def replay(self, folder):
        """Kept inputs must now run, mismatch or be refused cleanly."""
        inputs = sorted(p for p in pathlib.Path(folder).resolve().glob("*") if p.suffix in (".json", ".svodpkg"))
        failed = 0
        for path in inputs:
            kind = "plan" if path.suffix == ".json" else "package"
            base = Base.__new__(Base)
            base.name, base.folder, base.sums, base.package_sums = path.stem, path.parent, None, None
            # NAME.args: {"args": [flags], "env": {variables}, "oracle": "none", "fail" or "reject"}
            extra = path.with_suffix(".args")
            extra = json.loads(extra.read_text()) if extra.exists() else {}
            extra = {"args": extra.get("args", []), "env": extra.get("env", {}), "oracle": extra.get("oracle", "none")}
            mutant = Mutant(kind, 0, base, "kept input", extra["oracle"], path.read_bytes(), extra["args"],
                            extra["env"])
            env = dict(self.env)
            env.update(extra["env"])
            # Outputs go to the work folder, never beside the kept input.
            out = self.work / "replay" / path.stem
            result = run_svod(self.svod, path, extra["args"] + ["--out", str(out)], env, path.parent,
                              self.options.timeout, self.sanitized)
            outcome, detail = classify(mutant, result, None)
            failed += outcome.startswith("FAIL")
            self.log(f"  replay {path.name}: {outcome}: {detail}")
        self.log(f"replayed {len(inputs)} kept inputs from {folder}: {failed} failed")
        return failed

    def run(self, kind, count):
        start = time.monotonic()
        done = 0
        with ThreadPoolExecutor(self.options.jobs) as pool:
            for _ in pool.map(self.execute, self.mutants(kind, count)):
                done += 1
                if done % 100 == 0:
                    self.log(f"  {kind}: {done}/{count} ({time.monotonic() - start:.0f} s)")
        counts = self.counts.get(kind, {})
        self.log(f"{kind}s: {count} mutants in {time.monotonic() - start:.0f} s: "
                 + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def with_paths_from(data, folder, source_folder, keep):
    """A kept plan whose relative file names still find the base's files."""
    try:
        doc = parse_json(data.decode())
    except (ValueError, UnicodeDecodeError):
        return data
    relative = pathlib.Path(os.path.relpath(source_folder, keep))
    changed = False
    for container, index, value, path in list(walk(doc)):
        written = len(path) == 3 and path[0] == "outputs"  # an output's own npy is written, not read
        if (isinstance(value, str) and path and path[-1] in ("source_file", "npy") and not written
                and value and not value.startswith("/") and (folder / value).is_file()):
            put(container, index, (relative / value).as_posix())
            changed = True
    return dump(doc, 1).encode() if changed else data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--svod", required=True, help="the svod command to test")
    parser.add_argument("--plans", type=int, default=100, help="mutated plans to run (default 100)")
    parser.add_argument("--packages", type=int, default=100, help="mutated packages to run (default 100)")
    parser.add_argument("--seed", default="1", help="the campaign's seed (default 1)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    parser.add_argument("--timeout", type=int, default=10, help="svod run --timeout, seconds (default 10)")
    parser.add_argument("--work", help="scratch folder (default: a new temporary one, removed at the end)")
    parser.add_argument("--keep", help="where failing inputs go (default WORK/failures)")
    parser.add_argument("--replay", action="append", default=[], help="a folder of kept inputs to run first")
    parser.add_argument("--only", help="just this mutant, e.g. plan:17 or package:3")
    parser.add_argument("--show", action="store_true", help="with --only: print the mutant instead of running it")
    options = parser.parse_args()

    scratch = None
    if not options.work:
        scratch = tempfile.mkdtemp(prefix="svod-mutate-")
        options.work = scratch
    campaign = Campaign(options)
    try:
        campaign.log(f"svod {campaign.svod}{' (sanitized)' if campaign.sanitized else ''}, seed {options.seed}, "
                     f"work {campaign.work}")
        failed = sum(campaign.replay(folder) for folder in options.replay)
        if not (options.plans or options.packages or options.only):
            return 1 if failed else 0
        campaign.prepare()
        if options.only:
            kind, index = options.only.split(":")
            rng = random.Random(f"{options.seed}/{kind}/{int(index)}")
            maker = make_plan_mutant if kind == "plan" else make_package_mutant
            mutant = maker(rng, int(index), campaign.bases, campaign.sanitized)
            print(f"{mutant.name}: {mutant.what} (oracle {mutant.oracle}; flags {mutant.args}; env {mutant.env})")
            if options.show:
                sys.stdout.buffer.write(mutant.data[:20000] if mutant.kind == "plan" else b"")
                return 0
            outcome, detail, result = campaign.execute(mutant)
            print(f"{outcome}: {detail}\n--- status {result.status}\n--- stdout\n{result.out[-3000:]}"
                  f"--- stderr\n{result.err[-3000:]}")
            return 1 if outcome.startswith("FAIL") else 0
        campaign.run("plan", options.plans)
        campaign.run("package", options.packages)
        if campaign.failures:
            campaign.log(f"{len(campaign.failures)} failures; inputs and details in {campaign.keep}")
        if failed:
            campaign.log(f"{failed} kept inputs failed again")
        return 1 if failed or campaign.failures else 0
    finally:
        if scratch and not campaign.failures:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
