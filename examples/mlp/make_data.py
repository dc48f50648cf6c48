#!/usr/bin/python3
"""Writes the inputs and expected outputs of examples/mlp/plan.json.

A 3-layer MLP forward pass, batch 64: 256 -> 256 (ReLU) -> 128 (ReLU) -> 10,
then softmax. Weights use He initialisation from a fixed seed, so the files
are the same on every run. Expected logits and probabilities are computed in
float64 from the float32 inputs, so they measure the kernels' float32 error.

Run with Debian's interpreter, which has numpy: /usr/bin/python3 make_data.py
"""
import pathlib

import numpy as np

BATCH, SIZES = 64, (256, 256, 128, 10)
HERE = pathlib.Path(__file__).resolve().parent


def main():
    rng = np.random.default_rng(20240607)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    np.save(HERE / "x.npy", x)
    h = x.astype(np.float64)
    for layer, (k, n) in enumerate(zip(SIZES, SIZES[1:]), start=1):
        w = (rng.standard_normal((k, n)) * np.sqrt(2.0 / k)).astype(np.float32)
        b = (rng.standard_normal(n) * 0.1).astype(np.float32)
        np.save(HERE / f"w{layer}.npy", w)
        np.save(HERE / f"b{layer}.npy", b)
        h = h @ w.astype(np.float64) + b.astype(np.float64)
        if layer < len(SIZES) - 1:
            h = np.maximum(h, 0.0)
    np.save(HERE / "expected_logits.npy", h)
    e = np.exp(h - h.max(axis=1, keepdims=True))
    np.save(HERE / "expected_probs.npy", e / e.sum(axis=1, keepdims=True))


if __name__ == "__main__":
    main()
