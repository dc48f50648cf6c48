"""Bad input to any part of the Python API raises a svod.Error subclass with svod's message naming what
is wrong: never pybind11's "incompatible function arguments" or "Unable to cast", a bare TypeError,
ValueError or OverflowError, nor a crash. DLPack imports are validated; read-only memory stays
read-only; a daemon thread inside svod at interpreter exit does not abort the process."""
import ctypes
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import svod
from conftest import REPO, DLDataType, DLDevice, DLManagedTensor

FEATURES = REPO / "examples" / "features" / "plan.json"


def raises_type_error(match):
    """svod.ArgumentTypeError, checked to be a ValidationError and a TypeError as well."""
    return pytest.raises(svod.ArgumentTypeError, match=match)


def test_error_classes_are_also_the_builtin_ones():
    assert issubclass(svod.ValidationError, svod.Error) and issubclass(svod.ValidationError, ValueError)
    assert issubclass(svod.ArgumentTypeError, svod.ValidationError) and issubclass(svod.ArgumentTypeError, TypeError)
    assert svod.ArgumentTypeError.kind == "validation"
    with pytest.raises(TypeError):
        svod.device(42)
    with pytest.raises(ValueError):
        svod.device("nope")


def test_calls_with_missing_extra_or_unknown_arguments(cpu, add):
    # Before: pybind11's "incompatible function arguments" TypeError (or a ValidationError holding that text).
    with raises_type_error(r'svod\.Device\.allocate\(dtype, shape, \*, zero=True\): missing argument "shape"'):
        cpu.allocate("f32")
    with raises_type_error(r"takes 2 positional arguments, got 3"):
        cpu.allocate("f32", 4, True)
    with raises_type_error(r'svod\.Device\.allocate\(.*\): has no parameter named "zerro"'):
        cpu.allocate("f32", 4, zerro=True)
    with raises_type_error(r'svod\.Buffer\.view\(.*\): argument "byte_offset" given twice'):
        cpu.allocate("f32", 4).view(0, 1, byte_offset=0)
    with raises_type_error(r'svod\.Device\.compile\(.*\): missing argument "entry"'):
        cpu.compile(source="void k() {}")
    # Methods the old Python-side wrapper did not cover raised a bare TypeError.
    with raises_type_error(r"svod\.devices\(\): takes 0 positional arguments, got 1"):
        svod.devices(1)
    with raises_type_error(r"svod\.free_cached\(\): takes 0 positional arguments, got 1"):
        svod.free_cached(1)
    with raises_type_error(r"svod\.Device\.synchronize\(\): takes 0 positional arguments, got 1"):
        cpu.synchronize(1)
    with raises_type_error(r"svod\.Buffer\.to_numpy\(\): takes 0 positional arguments, got 1"):
        cpu.allocate("f32", 4).to_numpy(1)
    with raises_type_error(r"svod\.Plan\.execute\(vars=None, sequential=False\): takes 2 positional arguments, got 3"):
        svod.load_plan(FEATURES).execute(None, False, 3)
    with raises_type_error(r"svod\.Plan\.run\(\*, .*\): takes 0 positional arguments, got 1"):
        svod.load_plan(FEATURES).run(5)
    with raises_type_error(r"svod\.PlanBuilder\(\): takes 0 positional arguments, got 1"):
        svod.PlanBuilder(1)
    with raises_type_error(r'svod\.Capture\.__exit__\(exc_type, exc_value, traceback\): missing argument "exc_type"'):
        cpu.capture().__exit__()
    with raises_type_error(r'svod\.asbuffer\(array\): missing argument "array"'):
        svod.asbuffer()
    with raises_type_error(r'svod\.benchmark\(target, .*\): missing argument "target"'):
        svod.benchmark()
    with raises_type_error(r"svod\.profile\(\): takes 0 positional arguments, got 1"):
        svod.profile(1)


def test_methods_called_on_the_wrong_self(add):
    with raises_type_error(r"svod\.Buffer\.numpy\(\): `self` is a int, not a svod\.Buffer"):
        svod.Buffer.numpy(5)
    with raises_type_error(r"svod\.Device\.allocate\(.*\): `self` is a NoneType, not a svod\.Device"):
        svod.Device.allocate(None, "f32", 4)
    # Program.__call__ is svod's own: CPython's descriptor TypeError before.
    with raises_type_error(r"svod\.Program\.__call__: self: expected a svod\.Program, got NoneType"):
        svod.Program.__call__(None)
    with raises_type_error(r"svod\.Program\.__call__: called without the program"):
        svod.Program.__call__()


@pytest.mark.parametrize("cls, how", [
    (svod.Buffer, "Device.allocate"), (svod.Program, "Device.compile"), (svod.Device, "svod.device"),
    (svod.Plan, "svod.load_plan"), (svod.Capture, "Device.capture"), (svod.DeviceInfo, "svod.devices"),
    (svod.BenchmarkResult, "svod.benchmark"),
])
def test_classes_python_cannot_create_say_how_to_get_one(cls, how):
    # Before: TypeError "svod._svod.Buffer: No constructor defined!".
    with raises_type_error(rf"svod\.{cls.__name__} cannot be created directly: .*{how}"):
        cls()


def test_arguments_of_the_wrong_type_name_the_parameter(cpu):
    buf = cpu.allocate("f32", 4)
    # Before: pybind11's "incompatible function arguments" for each.
    with raises_type_error(r"svod\.device: name: expected a str, got int"):
        svod.device(1)
    with raises_type_error(r"svod\.device: cpu_compiler: expected a str, got int"):
        svod.device("CPU", 5)
    with raises_type_error(r"svod\.device: backend: expected a str, got int"):
        svod.device("CPU", backend=5)
    with raises_type_error(r"allocate: zero: expected a bool, got str"):
        cpu.allocate("f32", 4, zero="no")
    with raises_type_error(r"svod\.Buffer\.view: byte_offset: expected an integer, got str"):
        buf.view("0", 1)
    with raises_type_error(r"compile: entry: expected a str, got int"):
        cpu.compile(source="void k() {}", entry=1)
    with raises_type_error(r"compile: language: expected a str, got int"):
        cpu.compile(source="void k() {}", entry="k", language=1)
    with raises_type_error(r"compile: scalars: expected a list, got int"):
        cpu.compile(source="void k() {}", entry="k", scalars=5)
    with raises_type_error(r"compile_many: programs: expected a list of dicts, got int"):
        cpu.compile_many(5)
    with raises_type_error(r"compile_many: errors: expected a str, got int"):
        cpu.compile_many([], errors=1)
    with raises_type_error(r"load_plan: path: expected a path \(str, bytes or os\.PathLike\), got int"):
        svod.load_plan(5)
    with raises_type_error(r"load_plan: cpu_compiler: expected a str, got int"):
        svod.load_plan(FEATURES, cpu_compiler=5)
    with raises_type_error(r"load_plan: backend: expected a str, got int"):
        svod.load_plan(FEATURES, backend=5)
    with raises_type_error(r"run: check: expected a bool, got str"):
        svod.load_plan(FEATURES).run(check="yes")
    with raises_type_error(r"PlanBuilder\.add_view: bytes: expected an integer, got float"):
        svod.PlanBuilder().add_view(0, 0, 4.0, "f32")
    with raises_type_error(r"PlanBuilder\.add_variable: value: expected an integer, got str"):
        svod.PlanBuilder().add_variable("n", "x")
    with raises_type_error(r"PlanBuilder\.add_output: slot: expected an integer, got str"):
        svod.PlanBuilder().add_output("x")
    with raises_type_error(r"Capture\.variable: name: expected a str, got int"):
        cpu.capture().variable(1, 2)
    with raises_type_error(r"capture on CPU: slot: buffer: expected a svod\.Buffer, got int"):
        cpu.capture().slot(5)
    profile = svod.Profile()
    with raises_type_error(r"Profile\.table: per_op: expected a bool, got str"):
        profile.table(per_op="yes")
    with raises_type_error(r"Profile\.chrome_trace: path: expected a path .*, got NoneType"):
        profile.chrome_trace(None)


def test_values_pybind11_could_not_cast(cpu, add):
    # Before: ValidationError "Unable to cast Python instance to C++ type (#define
    # PYBIND11_DETAILED_ERROR_MESSAGES ...)", naming nothing.
    with raises_type_error(r"compile: name: expected a str, got int"):
        cpu.compile(source="void k() {}", entry="k", name=1)
    buf = cpu.allocate("f32", 4)
    with raises_type_error(r"svod\.Buffer\.__array__: copy: expected a bool, got str"):
        buf.__array__(copy="yes")
    with raises_type_error(r"svod\.Buffer\.__dlpack__: copy: expected a bool, got str"):
        buf.__dlpack__(copy="yes")
    plan = svod.load_plan(FEATURES)
    with raises_type_error(r"rebind: slot: expected a buffer index or name, got float"):
        plan.rebind(1.0, buf)
    with pytest.raises(svod.ValidationError, match=r"rebind: slot: -1 is negative"):
        plan.rebind(-1, buf)
    with raises_type_error(r'vars: key 1: expected a str, got int'):
        svod.load_plan(FEATURES, vars={1: 2})
    b = svod.PlanBuilder()
    b.add_buffer(np.zeros(4, np.float32), "x")
    with raises_type_error(r"PlanBuilder\.run: after\[0\]: expected an op index or id, got float"):
        b.run(add, [0, 0, 0], [4], after=[1.5])
    with pytest.raises(svod.ValidationError, match=r"PlanBuilder\.run: after\[0\]: -1 is negative"):
        b.run(add, [0, 0, 0], [4], after=[-1])
    with raises_type_error(r"PlanBuilder\.custom: attrs: key 1: expected a str, got int"):
        b.custom("fill", [0], attrs={1: 2})
    with pytest.raises(svod.ValidationError, match=r'custom: attrs\["value"\]: 1180591620717411303424 is outside the 64-bit'):
        b.custom("fill", [0], attrs={"value": 2**70})
    with raises_type_error(r'program "add" has no parameter named \'\\udcff\''):
        add(np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32), 4, **{"\udcff": 1})
    with pytest.raises(svod.ValidationError, match=r"load_package: package: the path 'a\\x00b' holds a NUL character"):
        svod.load_package("a\0b")


def test_non_iterables_where_a_sequence_or_dict_is_expected(cpu, add):
    # Before: Python's own TypeError "'int' object is not iterable" (or "'float' ...").
    with raises_type_error(r"allocate: shape: expected an element count or a sequence of dimensions, got float"):
        cpu.allocate("f32", 4.0)
    with raises_type_error(r"allocate: shape: expected an element count or a sequence of dimensions, got NoneType"):
        cpu.allocate("f32", None)
    with raises_type_error(r"vars: expected a dict, got int"):
        svod.load_plan(FEATURES, vars=5)
    with raises_type_error(r"vars: expected a dict, got int"):
        svod.load_plan(FEATURES).execute(vars=5)
    with raises_type_error(r"vars: expected a dict, got int"):
        svod.load_package(b"x", vars=5)
    with raises_type_error(r"benchmark: args: expected a sequence of the program's arguments, got int"):
        svod.benchmark(add, 5)
    with raises_type_error(r"PlanBuilder\.run: after: expected a sequence of op indices and ids, got int"):
        svod.PlanBuilder().run(add, [0, 0, 0], [4], after=5)


def test_values_accepted_for_the_wrong_reason_are_refused(cpu):
    # Before: None was numpy's default dtype (float64), True a count of 1, {} an empty shape, a list
    # of pairs a dict of variables, any truthy object a bool.
    with raises_type_error(r"dtype None: not a svod or numpy dtype"):
        cpu.allocate(None, 4)
    with raises_type_error(r"dtype None: not a svod or numpy dtype"):
        svod.PlanBuilder().add_view(0, 0, 4, None)
    with raises_type_error(r"allocate: shape: expected an element count or a sequence of dimensions, got bool"):
        cpu.allocate("f32", True)
    with raises_type_error(r"allocate: shape: expected an element count or a sequence of dimensions, got dict"):
        cpu.allocate("f32", {})
    with raises_type_error(r"svod\.Buffer\.view: byte_offset: expected an integer, got bool"):
        cpu.allocate("f32", 4).view(True, 1)
    with raises_type_error(r"vars: expected a dict, got list"):
        svod.load_plan(FEATURES, vars=[("N", 64)])
    with raises_type_error(r"execute: sequential: expected a bool, got str"):
        svod.load_plan(FEATURES).execute(sequential="no")
    with raises_type_error(r"allocate: zero: expected a bool, got NoneType"):
        cpu.allocate("f32", 4, zero=None)


def test_numpy_integers_are_integers_everywhere(cpu, add):
    # Before: "'numpy.int64' object is not iterable" (allocate), "expected an integer, got numpy.int64"
    # (vars, launch sizes).
    assert cpu.allocate("f32", np.int64(4)).shape == (4,)
    assert cpu.allocate("f32", np.array([2, 3])).shape == (2, 3)
    plan = svod.load_plan(FEATURES, vars={"N": np.int64(64)})
    assert plan.variables == {"N": 64}
    o, a = np.zeros(4, np.float32), np.ones(4, np.float32)
    add(o, a, a, 4, global_size=np.int64(1))
    np.testing.assert_array_equal(o, 2)
    with raises_type_error(r'program "add": global_size: expected an integer, got numpy\.ndarray'):
        add(o, a, a, 4, global_size=np.array([1, 2]))


def test_sizes_past_what_numpy_and_len_hold(cpu):
    # Before: a dimension of 2^63 was accepted with a zero dimension beside it; numpy() then raised
    # numpy's ValueError "negative dimensions are not allowed".
    with pytest.raises(svod.ValidationError, match=r"allocate: shape \(0, 9223372036854775808\) holds "
                                                   r"9223372036854775808 \(expected non-negative 64-bit integers below 2\^63\)"):
        cpu.allocate("u8", (0, 2**63))
    with pytest.raises(svod.ValidationError, match=r"svod\.Buffer\.view: 4611686018427387904 f32 elements are more "
                                                   r"bytes than fit in 64 bits"):
        cpu.allocate("f32", 4).view(0, 2**62)
    with pytest.raises(svod.ValidationError, match=r"PlanBuilder\.add_view: bytes: 9223372036854775808 is outside"):
        svod.PlanBuilder().add_view(0, 2**63, 2**63, "f32")


def test_benchmark_arguments(add):
    o, a = np.zeros(4, np.float32), np.ones(4, np.float32)
    args = [o, a, a, 4]
    # Before: runs=2**40 was pybind11's "incompatible function arguments"; timeout=1e300 overflowed
    # the conversion to nanoseconds (undefined behaviour) into "the timeout must be positive";
    # min_total=inf into "min_total must not be negative".
    with pytest.raises(svod.ValidationError, match=r"benchmark: runs: 1099511627776 is outside \[1, 2147483647\]"):
        svod.benchmark(add, args, runs=2**40)
    with raises_type_error(r"benchmark: runs: expected an integer, got str"):
        svod.benchmark(add, args, runs="10")
    with pytest.raises(svod.ValidationError, match=r"benchmark: timeout: 1e\+300 seconds is outside \(0, 9\.2e\+09\]"):
        svod.benchmark(add, args, runs=1, timeout=1e300)
    with pytest.raises(svod.ValidationError, match=r"benchmark: min_total: inf seconds is outside \[0, 9\.2e\+09\]"):
        svod.benchmark(add, args, runs=1, min_total=float("inf"))
    with pytest.raises(svod.ValidationError, match=r"benchmark: timeout: nan seconds"):
        svod.benchmark(add, args, runs=1, timeout=float("nan"))
    with raises_type_error(r"benchmark: target: expected a svod\.Program or svod\.Plan, got str"):
        svod.benchmark("add", [])
    assert svod.benchmark(add, tuple(args), runs=2).runs == 2


def test_paths_with_nul_characters(tmp_path):
    # Before: pybind11's "incompatible function arguments" (or "Unable to cast").
    with pytest.raises(svod.ValidationError, match=r"load_plan: path: the path 'a\\x00b' holds a NUL character"):
        svod.load_plan("a\0b")
    with pytest.raises(svod.ValidationError, match=r"Profile\.chrome_trace: path: the path .* holds a NUL character"):
        svod.Profile().chrome_trace(str(tmp_path / "a\0b"))


class _Tensor:
    """A hand-made DLPack producer: any data pointer, shape, strides, offset, dtype and device. No deleter:
    the producer must outlive the buffers made from it."""

    def __init__(self, data, shape, strides=None, byte_offset=0, dtype=(2, 32, 1), device=1):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(strides))(*strides) if strides is not None else None
        self.tensor = DLManagedTensor()
        t = self.tensor.dl_tensor
        t.data = data
        t.device = DLDevice(device, 0)
        t.ndim = len(shape)
        t.dtype = DLDataType(*dtype)
        t.shape = self.shape
        if self.strides is not None:
            t.strides = self.strides
        t.byte_offset = byte_offset

    def __dlpack__(self, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.tensor), b"dltensor", None)


def test_dlpack_pointer_offset_and_alignment_are_checked():
    memory = np.zeros(16, np.float32)
    data = memory.ctypes.data
    producer = _Tensor(data, (2, 2), byte_offset=8)  # its tensor must outlive the buffer (no deleter)
    fine = svod.from_dlpack(producer)
    assert fine.data_ptr == data + 8 and fine.shape == (2, 2)
    # Before: each was wrapped as it came (and read or written where it pointed).
    with pytest.raises(svod.ValidationError, match=r"from_dlpack: the DLPack tensor of 16 bytes has a null data pointer"):
        svod.from_dlpack(_Tensor(None, (4,)))
    empty = _Tensor(None, (0, 4))
    assert svod.from_dlpack(empty).count == 0  # nothing to point at
    with pytest.raises(svod.ValidationError, match=r"byte_offset 18446744073709551612 and 16 bytes from data pointer "
                                                   r"0x[0-9a-f]+ run past the end of the address space"):
        svod.from_dlpack(_Tensor(data, (4,), byte_offset=2**64 - 4))
    with pytest.raises(svod.ValidationError, match=r"first element at 0x[0-9a-f]+ is not aligned to its 4-byte f32 "
                                                   r"elements"):
        svod.from_dlpack(_Tensor(data, (2,), byte_offset=2))
    with pytest.raises(svod.ValidationError, match=r"first element at 0x[0-9a-f]+ is not aligned"):
        svod.from_dlpack(_Tensor(data + 1, (2,)))


def test_dlpack_strides_dtypes_and_devices_are_checked():
    memory = np.zeros(16, np.float32)
    data = memory.ctypes.data
    compact, row = _Tensor(data, (2, 3), strides=(3, 1)), _Tensor(data, (1, 3), strides=(99, 1))
    assert svod.from_dlpack(compact).shape == (2, 3)
    assert svod.from_dlpack(row).shape == (1, 3)  # a dimension of 1: any stride
    with pytest.raises(svod.ValidationError, match=r"negative stride \(-1 in dimension 0\)"):
        svod.from_dlpack(_Tensor(data + 12, (4,), strides=(-1,)))
    with pytest.raises(svod.ValidationError, match=r"not C-contiguous \(stride 2 in dimension 1, 1 expected\)"):
        svod.from_dlpack(_Tensor(data, (2, 2), strides=(4, 2)))
    with pytest.raises(svod.ValidationError, match=r"DLPack dtype \(code 2, 32 bits, 4 lanes\) has no svod element type"):
        svod.from_dlpack(_Tensor(data, (2,), dtype=(2, 32, 4)))
    with pytest.raises(svod.ValidationError, match=r"DLPack dtype \(code 42, 32 bits, 1 lanes\) has no svod element type"):
        svod.from_dlpack(_Tensor(data, (2,), dtype=(42, 32, 1)))
    with pytest.raises(svod.UnsupportedError, match=r"DLPack tensor on device type 2: svod wraps host tensors only"):
        svod.from_dlpack(_Tensor(data, (2,), device=2))
    with pytest.raises(svod.ValidationError, match=r"the DLPack tensor's dimension 0 is -1"):
        svod.from_dlpack(_Tensor(data, (-1,)))


class _Refusing:
    def __dlpack__(self, **kwargs):
        raise BufferError("this tensor cannot be exported")


def test_a_producer_refusing_dlpack_is_a_validation_error(add):
    # Before: the producer's BufferError went through as it was.
    with pytest.raises(svod.ValidationError, match=r"from_dlpack: _Refusing\.__dlpack__\(\) refused: BufferError: "
                                                   r"this tensor cannot be exported"):
        svod.from_dlpack(_Refusing())
    o, a = np.zeros(4, np.float32), np.ones(4, np.float32)
    with pytest.raises(svod.ValidationError, match=r'program "add": buffer 1 \("a"\): _Refusing\.__dlpack__\(\) refused'):
        add(o, _Refusing(), a, 4)


def test_dlpack_export_arguments(cpu):
    buf = cpu.allocate("f32", 4)
    # Before: dl_device=(2, 0) (CUDA) exported the host memory as if it were asked for.
    with pytest.raises(svod.UnsupportedError, match=r"dl_device \(2, 0\): svod exports host buffers as CPU tensors"):
        buf.__dlpack__(dl_device=(2, 0))
    with pytest.raises(svod.ValidationError, match=r"dl_device \(1,\) is not a \(device_type, device_id\) pair"):
        buf.__dlpack__(dl_device=(1,))
    with raises_type_error(r"svod\.Buffer\.__dlpack__: stream: expected None or an integer, got str"):
        buf.__dlpack__(stream="default")
    assert np.from_dlpack(buf).ctypes.data == buf.data_ptr
    assert buf.__dlpack__(dl_device=(1, 0), stream=None, max_version=(1, 0)) is not None
    # Before: numpy's TypeError "data type 'nope' not understood".
    with raises_type_error(r"svod\.Buffer\.__array__: dtype 'nope': expected a numpy dtype, got str"):
        buf.__array__(dtype="nope")


def test_read_only_memory_stays_read_only(cpu):
    frozen = np.frombuffer(b"\0" * 16, np.float32)  # bytes: immutable memory
    assert not frozen.flags.writeable
    buf = svod.asbuffer(frozen)
    # Before: numpy views of a read-only buffer were writable (a write changed the bytes object).
    assert not buf.numpy().flags.writeable
    assert not np.asarray(buf).flags.writeable
    assert not buf.view(4, 2).numpy().flags.writeable
    assert buf.to_numpy().flags.writeable  # a copy
    with pytest.raises(ValueError):
        buf.numpy()[0] = 1
    # Before: from_dlpack(array) raised numpy's BufferError (numpy cannot export read-only arrays).
    through_dlpack = svod.from_dlpack(frozen)
    assert through_dlpack.data_ptr == frozen.ctypes.data and not through_dlpack.numpy().flags.writeable
    with pytest.raises(svod.ValidationError, match="read-only"):
        through_dlpack.copy_from(np.ones(4, np.float32))
    # Before: exported through DLPack, which cannot say so, to consumers that would write.
    with pytest.raises(svod.UnsupportedError, match=r"__dlpack__: the memory is read-only and a DLPack tensor cannot "
                                                    r"say so"):
        buf.__dlpack__()
    writable = cpu.allocate("f32", 4)
    assert writable.numpy().flags.writeable and np.from_dlpack(writable).shape == (4,)


_DAEMON = textwrap.dedent("""
    import gc, sys, threading, time
    import numpy as np
    import svod

    cpu = svod.device("CPU")
    wait = cpu.compile(source="void wait(volatile long* flag, long n) {"
                              "  for (long i = 0; i < n && flag[0] == 0; i++) {} }",
                       entry="wait", buffers=[{"name": "flag", "dtype": "i64"}], scalars=[{"name": "n", "type": "i64"}])
    flag = np.zeros(1, np.int64)
    started = threading.Event()
    if sys.argv[1] == "call":
        def target():
            started.set()
            wait(flag, 1 << 40)
    else:
        b = svod.PlanBuilder()
        b.run(wait, [b.add_buffer(flag, "flag")], [1 << 40])
        plan = b.build()
        def target():
            started.set()
            plan.execute()
    def daemon():
        target()
        print("the daemon thread ran Python after finalization began", flush=True)
    threading.Thread(target=daemon, daemon=True).start()
    started.wait()
    time.sleep(0.2)  # inside the kernel

    class Release:
        # Collected by the interpreter's last collection, after finalization began: ends the
        # kernel, then gives the daemon thread time to come back into svod's binding.
        def __del__(self, flag=memoryview(flag).cast("B"), sleep=time.sleep):
            flag[0] = 1
            sleep(1)
    gc.disable()
    r = Release()
    r.cycle = r
    del r
    print("main thread ends", flush=True)
""")


@pytest.mark.parametrize("mode", ["call", "plan"])
def test_a_daemon_thread_inside_svod_at_exit_does_not_end_the_process_badly(tmp_path, mode):
    # Before: the Program call segfaulted (CPython's pthread_exit unwinding into svod's error
    # translation without the GIL); Plan.execute aborted with "terminate called without an active
    # exception" (the unwinding met pybind11's noexcept GIL guard).
    script = tmp_path / "daemon.py"
    script.write_text(_DAEMON)
    done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "main thread ends\n" and "terminate" not in done.stderr and "FATAL" not in done.stderr


# --- checked mode (issue 24) -------------------------------------------------

def _overrun_script(body):
    return textwrap.dedent(f"""
        import numpy as np, svod
        cpu = svod.device("CPU")
        k = cpu.compile(source="void k(float* o) {{ for (int i = 0; i <= 1024; i++) o[i] = i; }}", entry="k",
                        buffers=[{{"name": "o", "access": "write", "dtype": "f32"}}])
        {body}
        print("survived", flush=True)
    """)


def test_checked_mode_stops_an_overrun_at_the_first_element_and_names_it():
    # By default the buffer's guard page stops a one-element overrun; without it (SVOD_GUARD_PAGES=0)
    # and without checked mode the write lands in the allocator's slack, unnoticed.
    r = subprocess.run([sys.executable, "-c", _overrun_script("k(cpu.allocate('f32', 1024))")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "survived" not in r.stdout
    assert "svod.KernelFault" in r.stderr and "  guard page: " in r.stderr, r.stderr
    assert 'past the end of buffer 0 ("o", f32[1024]) at element 1024' in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-c", _overrun_script("k(cpu.allocate('f32', 1024))")],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "SVOD_GUARD_PAGES": "0"})
    assert r.returncode == 0 and "survived" in r.stdout, r.stderr
    r = subprocess.run([sys.executable, "-c", _overrun_script(
        "with svod.checked():\n            o = cpu.allocate('f32', 1024)\n        k(o)")],
        capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "survived" not in r.stdout
    assert 'past the end of buffer 0 ("o", f32[1024]) at element 1024' in r.stderr, r.stderr


def test_checked_restores_the_mode_and_refuses_unknown_checks():
    with svod.checked("nan"):
        with svod.checked("all"):
            pass
        assert svod._svod._check_mode() == "nan"
        # The switch words of every svod variable (docs/ENVIRONMENT.md): on is memory.
        with svod.checked("On"):
            assert svod._svod._check_mode() == "memory,nan"
        with svod.checked("false"):
            assert svod._svod._check_mode() == "nan"
    assert svod._svod._check_mode() == "off"
    with pytest.raises(svod.ValidationError, match='unknown check "bounds"'):
        with svod.checked("bounds"):
            pass
    with pytest.raises(svod.ArgumentTypeError):
        with svod.checked(3):
            pass
    assert svod._svod._check_mode() == "off"


def test_checked_nan_names_the_first_op_that_makes_a_nan(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({
        "svod_plan": 1, "buffers": {"o": {"dtype": "f32", "count": 4}},
        "programs": {"k": {"language": "c", "entry": "k", "source": "void k(float* o) { o[3] = o[3] / o[2]; }",
                           "buffers": [{"name": "o", "access": "readwrite", "dtype": "f32"}]}},
        "ops": [{"id": "divide", "run": "k", "buffers": ["o"]}], "outputs": {"o": {}}}))
    svod.load_plan(plan).execute()  # 0/0: a NaN nobody notices
    with svod.checked("nan"):
        p = svod.load_plan(plan)
        with pytest.raises(svod.ExecutionError,
                           match=r'op 0 \(divide\) kernel k failed: buffer 0 \("o"\) \(f32\[4\]\) holds NaN at '
                                 r'element 3'):
            p.execute()


def test_timeout_and_io_errors_are_also_the_builtin_ones(cpu, tmp_path):
    # Before: svod.TimeoutError was only a svod.Error, so `except TimeoutError` missed it.
    assert issubclass(svod.TimeoutError, TimeoutError) and issubclass(svod.TimeoutError, svod.Error)
    assert issubclass(svod.IoError, OSError) and issubclass(svod.IoError, svod.Error)
    e = svod.TimeoutError("ran past 2 s")
    assert str(e) == "ran past 2 s" and e.kind == "timeout" and e.errno is None
    with pytest.raises(OSError, match="cannot open") as info:
        cpu.compile(source_file=tmp_path / "missing.c", entry="k")
    assert isinstance(info.value, svod.IoError) and info.value.kind == "io"


def test_a_refusing_producer_is_named_without_a_traceback(add):
    # Before: pybind11's "\n\nAt:\n  file(line): __dlpack__" followed the message.
    with pytest.raises(svod.ValidationError) as info:
        svod.from_dlpack(_Refusing())
    assert str(info.value) == ("from_dlpack: _Refusing.__dlpack__() refused: BufferError: "
                               "this tensor cannot be exported")
    o, a = np.zeros(4, np.float32), np.ones(4, np.float32)
    with pytest.raises(svod.ValidationError) as info:
        add(o, _Refusing(), a, 4)
    assert "\n" not in str(info.value) and "At:" not in str(info.value)


# --- Ctrl-C during a kernel ----------------------------------------------------

_SPIN = """
import sys, time, numpy as np, svod
cpu = svod.device("CPU")
k = cpu.compile(source="void k(volatile float* o) { for (;;) o[0] += 1; }", entry="k",
                buffers=[{"name": "o", "access": "readwrite", "dtype": "f32"}])
o = np.zeros(4, np.float32)
def run():
    if sys.argv[1] == "call":
        k(o)
    else:
        b = svod.PlanBuilder()
        b.run(k, [b.add_buffer(o, "o")])
        b.build().execute()
print("started", flush=True)
try:
    run()
    print("returned", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt at", time.monotonic(), flush=True)
quick = cpu.compile(source="void q(float* o) { o[1] = 7; }", entry="q",
                    buffers=[{"name": "o", "access": "write", "dtype": "f32"}])
quick(o)
print("went on", o[1], flush=True)
"""


@pytest.mark.parametrize("mode", ["call", "plan"])
def test_ctrl_c_stops_a_spinning_kernel_with_keyboard_interrupt_and_python_goes_on(tmp_path, mode):
    script = tmp_path / "spin.py"
    script.write_text(_SPIN)
    child = subprocess.Popen([sys.executable, str(script), mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout.readline() == "started\n"
        time.sleep(0.3)  # inside the kernel by now
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
    lines = out.split("\n")
    assert lines[0].startswith("KeyboardInterrupt at "), out + err
    assert float(lines[0].split()[-1]) - sent < 2.0, "the interrupt came late"  # about 0.01 s here
    assert lines[1] == "went on 7.0", out + err
    assert child.returncode == 0, err
