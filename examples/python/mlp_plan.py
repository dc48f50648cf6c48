"""The MLP plan (examples/mlp/plan.json) run from Python with its input bound from numpy."""
import pathlib

import numpy as np

import svod

here = pathlib.Path(__file__).resolve().parent
mlp = here.parent / "mlp"

plan = svod.load_plan(mlp / "plan.json")
x = np.load(mlp / "x.npy")
out = plan.run(x=x, check=True)  # x is used in place; check compares with the file's expectations
probs = out["probs"]
assert plan.buffers["x"].data_ptr == x.ctypes.data
assert np.allclose(probs.sum(axis=1), 1, atol=1e-5)

# A second batch: new numbers in the same array, no rebinding needed.
x[:] = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
probs2 = plan.run()["probs"]
print("predicted classes, batch 1:", probs.argmax(axis=1)[:8], "batch 2:", probs2.argmax(axis=1)[:8])

with svod.profile() as p:
    for _ in range(10):
        plan.execute()
print(p.table())
