"""Data-parallel training from Python: numpy data, svod kernels, gradients all-reduced with svod.comm.

    /usr/bin/python3 examples/python/data_parallel.py --ranks 4          # 4 ranks as threads
    mpirun -np 4 /usr/bin/python3 examples/python/data_parallel.py       # 4 processes

A softmax classifier (16 features, 4 classes) trains on a batch of 256 rows split into one shard
per rank. Each rank's kernel sums its rows' gradients in fixed point (integers of 2^-32) and one
all_reduce adds the ranks' sums. Integer addition is exact, so the total does not depend on how the
rows were split: the weights are the same bits on 1, 2, 4 (any number of) ranks, under threads or
processes, over shared memory or TCP. (Float sums would differ in the last bits between splits.)
Rank 0 prints the loss of every step and the weights' SHA-256; the run checks that every rank
holds the same weights and that they match a float64 numpy reference of the same training.
"""
import argparse
import hashlib

import numpy as np

import svod
import svod.comm

FEATURES, CLASSES, ROWS, LR = 16, 4, 256, 0.5
SCALE = 2.0**32  # fixed point: gradients in integers of 2^-32
PARAMS = FEATURES * CLASSES + CLASSES  # w (FEATURES x CLASSES) then b

KERNELS = r"""
#include <math.h>
#define SCALE 4294967296.0
static long long fixed(double v) { return llrint(v * SCALE); }

// g = the fixed-point sum over rows [row0, row0 + rows) of each row's share of the batch-mean
// gradient of the softmax cross-entropy (then its loss, last).
void grad(long long* restrict g, const float* restrict x, const int* restrict labels,
          const float* restrict p, int row0, int rows) {
  const float* w = p;
  const float* b = p + F * C;
  for (int k = 0; k < F * C + C + 1; k++) g[k] = 0;
  for (int r = row0; r < row0 + rows; r++) {
    float logits[C], top = -INFINITY, z = 0;
    for (int c = 0; c < C; c++) {
      float s = b[c];
      for (int i = 0; i < F; i++) s += x[r * F + i] * w[i * C + c];
      logits[c] = s;
      top = fmaxf(top, s);
    }
    for (int c = 0; c < C; c++) z += expf(logits[c] - top);
    g[F * C + C] += fixed((logf(z) + top - logits[labels[r]]) / N);
    for (int c = 0; c < C; c++) {
      const float d = (expf(logits[c] - top) / z - (c == labels[r])) / N;
      for (int i = 0; i < F; i++) g[i * C + c] += fixed(x[r * F + i] * d);
      g[F * C + c] += fixed(d);
    }
  }
}

// p -= LR * g (g in fixed point): the same update from the same g on every rank.
void sgd(float* restrict p, const long long* restrict g) {
  for (int k = 0; k < F * C + C; k++) p[k] -= LR * (float)(g[k] / SCALE);
}
"""


def make_data():
    """The batch every rank holds: four Gaussian blobs, one per class."""
    rng = np.random.default_rng(7)
    labels = rng.integers(0, CLASSES, ROWS).astype(np.int32)
    centers = rng.normal(0, 1.5, (CLASSES, FEATURES))
    x = (centers[labels] + rng.normal(0, 1, (ROWS, FEATURES))).astype(np.float32)
    return x, labels


def compile_kernels():
    cpu = svod.device("CPU")
    defines = {"F": FEATURES, "C": CLASSES, "N": ROWS, "LR": f"{LR}f"}
    grad = cpu.compile(source=KERNELS, entry="grad", defines=defines,
                       buffers=[{"name": "g", "access": "write", "dtype": "i64"}, {"name": "x", "dtype": "f32"},
                                {"name": "labels", "dtype": "i32"}, {"name": "p", "dtype": "f32"}],
                       scalars=[{"name": "row0", "type": "i32"}, {"name": "rows", "type": "i32"}])
    sgd = cpu.compile(source=KERNELS, entry="sgd", defines=defines,
                      buffers=[{"name": "p", "access": "readwrite", "dtype": "f32"}, {"name": "g", "dtype": "i64"}])
    return grad, sgd


def train(comm, kernels, steps):
    """Trains on this rank's shard; returns (weights, losses), the same on every rank."""
    grad, sgd = kernels
    x, labels = make_data()
    params = np.zeros(PARAMS, np.float32)
    g = np.empty(PARAMS + 1, np.int64)
    row0 = comm.rank * ROWS // comm.world_size
    rows = (comm.rank + 1) * ROWS // comm.world_size - row0
    losses = []
    for _ in range(steps):
        grad(g, x, labels, params, row0=row0, rows=rows)
        comm.all_reduce(g)  # integer sum: exact, the same on any number of ranks
        losses.append(g[-1] / SCALE)
        sgd(params, g)
    # Every rank holds the same weights: gather them all and compare.
    everyone = comm.all_gather(params)
    if not all(np.array_equal(everyone[0].view(np.uint32), w.view(np.uint32)) for w in everyone):
        raise SystemExit(f"rank {comm.rank}: the ranks' weights differ")
    return params, losses


def reference(steps):
    """The same training in float64 numpy."""
    x, labels = make_data()
    x = x.astype(np.float64)
    params = np.zeros(PARAMS)
    onehot = np.eye(CLASSES)[labels]
    for _ in range(steps):
        w, b = params[:FEATURES * CLASSES].reshape(FEATURES, CLASSES), params[FEATURES * CLASSES:]
        logits = x @ w + b
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        d = (e / e.sum(axis=1, keepdims=True) - onehot) / ROWS
        params = params - LR * np.concatenate([(x.T @ d).ravel(), d.sum(axis=0)])
    return params


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--ranks", type=int, default=1, help="ranks as threads (without a launcher)")
    args = parser.parse_args()
    kernels = compile_kernels()
    world = svod.comm.world()
    if world.transport == "mpi":
        results = [train(world, kernels, args.steps)]
        ranks, rank = world.world_size, world.rank
    else:
        results = svod.comm.run_local(args.ranks, lambda comm: train(comm, kernels, args.steps))
        ranks, rank = args.ranks, 0
    if rank != 0:
        return
    params, losses = results[0]
    for step, loss in enumerate(losses, 1):
        print(f"step {step:3d}: loss {loss:.6f}")
    error = np.abs(params - reference(args.steps)).max()
    if error > 1e-4:
        raise SystemExit(f"the weights are {error:.3g} away from the float64 reference")
    print(f"{ranks} ranks ({world.transport if world.transport == 'mpi' else 'local'}): weights bitwise identical "
          f"on every rank, {error:.2g} from the float64 reference")
    print(f"weights sha256 {hashlib.sha256(params.tobytes()).hexdigest()}")


if __name__ == "__main__":
    main()
