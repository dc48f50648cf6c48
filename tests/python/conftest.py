"""Shared fixtures of the svod Python tests: the CPU device and a few kernels."""
import ctypes
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import svod

REPO = pathlib.Path(__file__).resolve().parents[2]


def python_exits_cleanly(code, times):
    """Runs `code` in `times` fresh interpreters, one after another; each must exit with status 0 (for
    races that show in some runs only)."""
    for _ in range(times):
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr

ADD_SOURCE = """
void add(float* restrict o, const float* restrict a, const float* restrict b, int n) {
  for (int i = 0; i < n; i++) o[i] = a[i] + b[i];
}
"""

ADD_BUFFERS = [
    {"name": "o", "access": "write", "dtype": "f32"},
    {"name": "a", "dtype": "f32"},
    {"name": "b", "dtype": "f32"},
]


@pytest.fixture(scope="session")
def cpu():
    return svod.device("CPU")


@pytest.fixture(scope="session")
def add(cpu):
    """o[i] = a[i] + b[i] for i < n, with declared dtypes and a bounded n."""
    return cpu.compile(source=ADD_SOURCE, entry="add", buffers=ADD_BUFFERS,
                       scalars=[{"name": "n", "type": "i32", "min": 0, "max": 1 << 20}])


@pytest.fixture(scope="session")
def add_sized(cpu):
    """The same kernel declaring that every buffer needs n elements."""
    buffers = [dict(b, min_count="n") for b in ADD_BUFFERS]
    return cpu.compile(source=ADD_SOURCE, entry="add", name="add_sized", buffers=buffers,
                       scalars=[{"name": "n", "type": "i32"}])


def arrays(n=16, dtype=np.float32):
    a = np.arange(n, dtype=dtype)
    b = np.full(n, 10, dtype=dtype)
    return np.zeros(n, dtype=dtype), a, b


# DLPack's C structures (dlpack.h, version 0.x capsules), for tests that build a producer by hand.
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]
