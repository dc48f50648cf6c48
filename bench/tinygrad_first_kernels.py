"""A fresh process's first tinygrad kernels, for DEBUG=2's per-kernel times (`tm`): two random 64 x 64
tensors, then their product (the first core_id launch). Run once per device and compare:

  DEBUG=2 DEV=CPU  PYTHONPATH=path/to/tinygrad:build/release/python python3 bench/tinygrad_first_kernels.py
  DEBUG=2 DEV=SVOD PYTHONPATH=path/to/tinygrad:build/release/python python3 bench/tinygrad_first_kernels.py
"""
import os

if os.environ.get("DEV") == "SVOD":
    import svod.tinygrad  # noqa: F401 - registers the device SVOD (an installed svod needs no import)
from tinygrad import Tensor

a = Tensor.rand(64, 64).realize()
b = Tensor.rand(64, 64).realize()
(a @ b).realize()
