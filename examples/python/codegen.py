"""A tiny code generator: renders elementwise and reduction kernels from strings, compiles each
once, and runs them in a loop — how an ML compiler uses svod."""
import numpy as np

import svod

cpu = svod.device("CPU")
_cache = {}


def elementwise(name, expr, inputs):
    """out[i] = expr over inputs[i] (C expression text)."""
    key = ("ew", name, expr, inputs)
    if key not in _cache:
        params = ", ".join(f"const float* restrict {v}" for v in inputs)
        body = expr
        for v in inputs:
            body = body.replace(f"{{{v}}}", f"{v}[i]")
        source = f"void {name}(float* restrict out, {params}, int n) {{ for (int i = 0; i < n; i++) out[i] = {body}; }}"
        _cache[key] = cpu.compile(
            source=source, entry=name,
            buffers=[{"name": "out", "access": "write", "dtype": "f32"}] + [{"name": v, "dtype": "f32"} for v in inputs],
            scalars=[{"name": "n", "type": "i32"}])
    return _cache[key]


def reduction(name, op, identity):
    """out[0] = fold(op) over x[0..n)."""
    key = ("red", name, op)
    if key not in _cache:
        source = (f"void {name}(float* restrict out, const float* restrict x, int n) {{"
                  f" float acc = {identity}; for (int i = 0; i < n; i++) acc = {op}; out[0] = acc; }}")
        _cache[key] = cpu.compile(source=source, entry=name,
                                  buffers=[{"name": "out", "access": "write", "dtype": "f32"}, {"name": "x", "dtype": "f32"}],
                                  scalars=[{"name": "n", "type": "i32"}])
    return _cache[key]


n = 4096
rng = np.random.default_rng(0)
a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
t, u, s, mx = np.empty(n, np.float32), np.empty(n, np.float32), np.empty(1, np.float32), np.empty(1, np.float32)

for step in range(100):
    elementwise("mul_add", "{a} * {b} + 1.0f", ("a", "b"))(t, a, b, n)
    elementwise("relu", "{t} > 0 ? {t} : 0", ("t",))(u, t, n)
    reduction("sum", "acc + x[i]", "0.0f")(s, u, n)
    reduction("max", "x[i] > acc ? x[i] : acc", "-1e30f")(mx, u, n)

ref = np.maximum(a * b + 1, 0)
assert np.allclose(s[0], ref.sum(), rtol=1e-3) and mx[0] == ref.max()
print(f"{len(_cache)} kernels compiled once, run 100 times each: sum {s[0]:.3f}, max {mx[0]:.3f}")
