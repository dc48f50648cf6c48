"""DLPack: svod buffers and other frameworks' tensors share memory both ways (torch when installed)."""
import numpy as np

import svod

cpu = svod.device("CPU")
scale = cpu.compile(source="void scale(float* x, int n) { for (int i = 0; i < n; i++) x[i] *= 2.0f; }",
                    entry="scale", buffers=[{"name": "x", "access": "readwrite", "dtype": "f32"}],
                    scalars=[{"name": "n", "type": "i32"}])

# svod -> numpy through DLPack: same memory (numpy marks DLPack imports read-only).
buf = cpu.allocate("f32", 8)
buf.copy_from(np.arange(8, dtype=np.float32))
view = np.from_dlpack(buf)
scale(buf, 8)
assert view.ctypes.data == buf.data_ptr and view[7] == 14

try:
    import torch
except ImportError:
    torch = None

if torch is not None:
    t = torch.arange(8, dtype=torch.float32)
    wrapped = svod.from_dlpack(t)          # svod <- torch, no copy
    assert wrapped.data_ptr == t.data_ptr()
    scale(wrapped, 8)
    assert t[7].item() == 14
    back = torch.from_dlpack(buf)          # torch <- svod, no copy
    assert back.data_ptr() == buf.data_ptr
    print("torch and svod share memory both ways")
else:
    # Any DLPack producer works the same; numpy arrays are one.
    a = np.arange(8, dtype=np.float32)
    wrapped = svod.from_dlpack(a)
    scale(wrapped, 8)
    assert wrapped.data_ptr == a.ctypes.data and a[7] == 14
    print("numpy and svod share memory both ways (torch is not installed)")
