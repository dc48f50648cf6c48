"""OpenCL from Python (PoCL's CL:0 on the reference machine)."""
import numpy as np
import pytest

import svod
from conftest import python_exits_cleanly

FMA = """
__kernel void fma3(__global float* o, __global const float* a, __global const float* b, int n) {
  int i = get_global_id(0);
  if (i < n) o[i] = a[i] * b[i] + 1.0f;
}
"""


@pytest.fixture(scope="module")
def cl():
    # As the C++ OpenCL tests: skipped only where there is no OpenCL device at all.
    try:
        return svod.device("CL:0")
    except svod.DeviceUnavailableError as e:
        pytest.skip(f"no OpenCL device: {e}")


def test_opencl_kernel_on_device_buffers(cl):
    prog = cl.compile(source=FMA, entry="fma3", language="opencl",
                      buffers=[{"name": "o", "access": "write", "dtype": "f32"},
                               {"name": "a", "dtype": "f32"}, {"name": "b", "dtype": "f32"}],
                      scalars=[{"name": "n", "type": "i32"}], global_size=["(n + 63) / 64"], local_size=[64])
    n = 1000
    a_host = np.linspace(0, 1, n, dtype=np.float32)
    b_host = np.full(n, 3, np.float32)
    o, a, b = (cl.allocate("f32", n) for _ in range(3))
    assert o.device == "CL:0" and not o.is_host
    a.copy_from(a_host)
    b.copy_from(b_host)
    prog(o, a, b, n)
    np.testing.assert_allclose(o.to_numpy(), a_host * b_host + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(o), a_host * b_host + 1, rtol=1e-6)
    with pytest.raises(svod.ValidationError, match="cannot be passed to a program on CL:0"):
        prog(np.zeros(n, np.float32), a, b, n)
    with pytest.raises(svod.UnsupportedError, match="to_numpy"):
        o.numpy()
    with pytest.raises(svod.UnsupportedError):
        np.from_dlpack(o)
    with pytest.raises(svod.ValidationError):
        prog(o, svod.device("CPU").allocate("f32", n), b, n)


def test_opencl_compile_error(cl):
    with pytest.raises(svod.CompileError) as info:
        cl.compile(source="__kernel void k(__global float* o) { nonsense }", entry="k", language="opencl",
                   buffers=[{"name": "o", "access": "write"}])
    assert info.value.log


def test_cross_device_plan_binds_host_and_device_buffers(cl):
    from conftest import REPO
    plan = svod.load_plan(REPO / "examples" / "cross_device" / "plan.json")
    assert plan.buffers["d_b"].device == "CL:0"
    x = np.arange(256, dtype=np.float32) / 16
    b = np.full(256, 2, np.float32)
    out = plan.run(x=x, d_b=b, check=False)  # x is used in place, b is copied to CL:0
    assert plan.buffers["x"].data_ptr == x.ctypes.data
    np.testing.assert_allclose(out["out"], 2 * x * x + 2, rtol=1e-6)
    np.testing.assert_allclose(plan.buffers["d_b"].to_numpy(), b)
    # Variables size the OpenCL launches too: only the first N elements change.
    plan.run(vars={"N": 128}, x=np.ones(256, np.float32), check=False)
    got = plan.buffers["out"].to_numpy()
    np.testing.assert_allclose(got[:128], 2 * 1 * 1 + 2, rtol=1e-6)
    np.testing.assert_allclose(got[128:], 2 * x[128:] * x[128:] + 2, rtol=1e-6)
    with pytest.raises(svod.ValidationError):
        plan.execute(vars={"nonexistent": 1})


def test_devices_from_several_threads_at_once_in_a_fresh_process(cl):
    # Each process enumerates once: two threads doing it together used to crash in the ICD loader
    # (SIGSEGV in 5 of 10 runs, issue 40).
    code = ("import threading, svod\n"
            "found = []\n"
            "threads = [threading.Thread(target=lambda: found.append([d.name for d in svod.devices()]))\n"
            "           for _ in range(4)]\n"
            "[t.start() for t in threads]\n"
            "[t.join() for t in threads]\n"
            "assert len(found) == 4 and all(f == found[0] for f in found), found\n"
            "assert 'CL:0' in found[0], found[0]\n")
    python_exits_cleanly(code, 6)
