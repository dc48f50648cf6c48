#!/usr/bin/python3
"""Writes the data and the numpy reference of examples/data_parallel/plan.json.

A two-layer MLP classifier, 32 -> 64 (ReLU) -> 10, trained with softmax
cross-entropy and plain SGD on one batch of 64 examples. The labels come from
a random linear "teacher", so there is something to learn. Everything is drawn
from a fixed seed, so the files are the same on every run.

The reference trains on the WHOLE batch in float64 (starting from the float32
files), which is what the plan computes on any number of ranks: each rank's
gradients are divided by the global batch size and the all_reduce sums them.
It writes the weights and loss after the first step (the plan's outputs,
which `svod run` checks after its first execution) and the weights after
STEPS steps (tests/planfile/data_parallel_test.cpp and train.cpp run STEPS
executions).

Run with Debian's interpreter, which has numpy: /usr/bin/python3 make_data.py
"""
import pathlib

import numpy as np

BATCH, IN, HIDDEN, OUT = 64, 32, 64, 10
LR = np.float32(0.5)  # the plan's sgd "LR" define
STEPS = 10
HERE = pathlib.Path(__file__).resolve().parent


def step(params, x, labels):
    """One full-batch SGD step in float64; returns the new params and the loss before it."""
    w1, b1, w2, b2 = params
    h = np.maximum(x @ w1 + b1, 0.0)
    logits = h @ w2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(shifted)
    p /= p.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = -np.log(p[rows, labels]).mean()
    dlogits = p
    dlogits[rows, labels] -= 1.0
    dlogits /= len(labels)
    dh = (dlogits @ w2.T) * (h > 0)
    grads = (x.T @ dh, dh.sum(axis=0), h.T @ dlogits, dlogits.sum(axis=0))
    lr = float(LR)
    return tuple(w - lr * g for w, g in zip(params, grads)), loss


def main():
    rng = np.random.default_rng(20261130)
    x = rng.standard_normal((BATCH, IN)).astype(np.float32)
    teacher = rng.standard_normal((IN, OUT))
    labels = np.argmax(x.astype(np.float64) @ teacher, axis=1).astype(np.int32)
    w1 = (rng.standard_normal((IN, HIDDEN)) * np.sqrt(2.0 / IN)).astype(np.float32)
    b1 = np.zeros(HIDDEN, np.float32)
    w2 = (rng.standard_normal((HIDDEN, OUT)) * np.sqrt(1.0 / HIDDEN)).astype(np.float32)
    b2 = np.zeros(OUT, np.float32)
    names = ("w1", "b1", "w2", "b2")
    for name, value in zip(names + ("x", "labels"), (w1, b1, w2, b2, x, labels)):
        np.save(HERE / f"{name}.npy", value)

    params = tuple(p.astype(np.float64) for p in (w1, b1, w2, b2))
    x64 = x.astype(np.float64)
    for k in range(1, STEPS + 1):
        params, loss = step(params, x64, labels)
        print(f"step {k:2d}: loss {loss:.6f}")
        if k == 1:
            np.save(HERE / "step1_loss.npy", np.array([loss]))
            for name, value in zip(names, params):
                np.save(HERE / f"step1_{name}.npy", value)
    for name, value in zip(names, params):
        np.save(HERE / f"step{STEPS}_{name}.npy", value)


if __name__ == "__main__":
    main()
