"""What a cached `Device.compile` costs from Python (issue 36 item 4). Run with the package on the path:

    SVOD_BINARY_DIR=$PWD/build/release PYTHONPATH=build/release/python /usr/bin/python3 \
        bench/python_compile_bench.py

The kernel is compiled once first, so every timed call finds it in the process's kernel cache:
what is timed is Python's side (turning the arguments into a ProgramSpec), the cache lookup and
making the svod.Program. Prints medians of per-call times (each sample the mean of a batch of
200 calls) for:
  1. compile() with buffers= and scalars= declared as dicts of strings ("f32", "i32");
  2. the same with numpy dtypes (np.float32) in the dicts;
  3. compile() with buffers= and scalars= left out (inferred from the C source);
  4. compile_many() of 8 such programs, per program;
  5. for reference, json.dumps of the arguments (what the old JSON path paid first).
"""
import json

import numpy as np

import svod
from bench_python import per_call_ns  # beside this file

BATCH = 200
SAMPLES = 101

SOURCE = ("void add(float* restrict o, const float* restrict a, const float* restrict b, int n)\n"
          "{ for (int i = 0; i < n; i++) o[i] = a[i] + b[i]; }\n")
BUFFERS = [{"name": "o", "access": "write", "dtype": "f32"}, {"name": "a", "dtype": "f32"},
           {"name": "b", "dtype": "f32"}]
NUMPY_BUFFERS = [{"name": "o", "access": "write", "dtype": np.float32}, {"name": "a", "dtype": np.float32},
                 {"name": "b", "dtype": np.float32}]
SCALARS = [{"name": "n", "type": "i32"}]


def per_call_us(fn, batch=BATCH, samples=SAMPLES):
    """Median over `samples` batches of the mean time per call, in microseconds."""
    return per_call_ns(fn, batch, samples) / 1e3


def main():
    cpu = svod.device("CPU")
    declared = lambda: cpu.compile(source=SOURCE, entry="add", buffers=BUFFERS, scalars=SCALARS)
    declared()  # compiled once; every timed call is a kernel-cache hit
    rows = [("compile, declared (dtype strings)", per_call_us(declared))]
    try:
        with_numpy = lambda: cpu.compile(source=SOURCE, entry="add", buffers=NUMPY_BUFFERS, scalars=SCALARS)
        with_numpy()
        rows.append(("compile, declared (numpy dtypes)", per_call_us(with_numpy)))
    except svod.Error as e:
        rows.append((f"compile, declared (numpy dtypes): refused ({str(e).splitlines()[0][:60]})", None))
    try:
        inferred = lambda: cpu.compile(source=SOURCE, entry="add")
        prog = inferred()
        if len(prog.buffers) != 3:
            raise svod.ValidationError("not inferred")
        rows.append(("compile, inferred from the source", per_call_us(inferred)))
    except svod.Error as e:
        rows.append((f"compile, inferred: not supported ({str(e).splitlines()[0][:60]})", None))
    programs = [dict(source=SOURCE, entry="add", name=f"add{i}", buffers=BUFFERS, scalars=SCALARS) for i in range(8)]
    cpu.compile_many(programs)
    rows.append(("compile_many of 8, per program", per_call_us(lambda: cpu.compile_many(programs), batch=25) / 8))
    spec = dict(source=SOURCE, entry="add", language="c", buffers=BUFFERS, scalars=SCALARS)
    rows.append(("json.dumps of the arguments (reference)", per_call_us(lambda: json.dumps(spec))))
    for what, us in rows:
        print(f"{what:<48} {'-' if us is None else f'{us:8.2f} us'}")


if __name__ == "__main__":
    main()
