"""svod.Buffer: numpy views, copies, release, and DLPack both ways without copies."""
import ctypes
import gc
import sys

import numpy as np
import pytest

import svod
from conftest import DLDataType, DLDevice, DLManagedTensor


def test_allocate_and_view_without_copy(cpu):
    buf = cpu.allocate("f32", (4, 8))
    assert buf.shape == (4, 8) and buf.count == 32 and buf.nbytes == 128 and buf.dtype == "f32"
    assert buf.device == "CPU" and buf.is_host
    view = buf.numpy()
    assert view.shape == (4, 8) and view.dtype == np.float32
    assert view.ctypes.data == buf.data_ptr
    view[1, 2] = 5
    assert np.asarray(buf)[1, 2] == 5
    assert np.asarray(buf).ctypes.data == buf.data_ptr
    assert np.asarray(buf).sum() == 5  # zero-filled apart from the one write


def test_allocate_dtypes(cpu):
    for name, np_type in [("i8", np.int8), ("u16", np.uint16), ("i64", np.int64), ("f16", np.float16),
                          ("f64", np.float64), ("bool", np.bool_), ("float32", np.float32)]:
        assert cpu.allocate(name, 3).numpy().dtype == np_type
    assert cpu.allocate(np.dtype("int32"), 3).dtype == "i32"
    with pytest.raises(svod.ValidationError, match="dtype"):
        cpu.allocate("complex128", 3)
    with pytest.raises(svod.ValidationError, match="dtype"):
        cpu.allocate("nonsense", 3)
    with pytest.raises(svod.ValidationError, match="count"):
        cpu.allocate("f32", -1)


def test_allocate_refuses_sizes_past_64_bits(cpu):
    # 2^32 x 2^32 elements wrapped to a count of 0; 2^62 f32 to 0 bytes.
    with pytest.raises(svod.ValidationError, match=r"allocate: shape \(4294967296, 4294967296\) of f32 elements is more "
                                                   r"bytes than fit in 64 bits"):
        cpu.allocate("f32", (2**32, 2**32))
    with pytest.raises(svod.ValidationError, match="more bytes than fit in 64 bits"):
        cpu.allocate("f32", 2**62)
    with pytest.raises(svod.ValidationError, match="more bytes than fit in 64 bits"):
        cpu.allocate("u8", (2**32, 2**32))
    with pytest.raises(svod.ValidationError, match="non-negative 64-bit"):
        cpu.allocate("u8", 2**64)
    with pytest.raises(svod.ValidationError, match="non-negative 64-bit"):
        cpu.allocate("u8", (2, -1))
    assert cpu.allocate("u8", (0, 2**40)).count == 0  # a zero dimension: nothing to hold
    assert cpu.allocate("u8", (2**3, 2**4)).count == 128


def test_to_numpy_copies_and_copy_from(cpu):
    buf = cpu.allocate("i32", 5)
    buf.copy_from(np.arange(5, dtype=np.int32))
    out = buf.to_numpy()
    np.testing.assert_array_equal(out, np.arange(5))
    out[0] = 99
    assert buf.numpy()[0] == 0
    with pytest.raises(svod.ValidationError, match="dtype"):
        buf.copy_from(np.arange(5, dtype=np.int64))
    with pytest.raises(svod.ValidationError, match="bytes"):
        buf.copy_from(np.arange(6, dtype=np.int32))


def test_released_buffer_refuses_use(cpu, add):
    buf = cpu.allocate("f32", 4)
    view = buf.numpy()
    view[:] = 3
    buf.release()
    assert buf.released
    for use in (buf.numpy, buf.to_numpy, lambda: buf.shape and buf.count, lambda: np.asarray(buf)):
        with pytest.raises(svod.ValidationError, match="used after release"):
            use()
    with pytest.raises(svod.ValidationError, match="used after release"):
        add(buf, np.zeros(4, np.float32), np.zeros(4, np.float32), 4)
    # Views made before keep the memory.
    np.testing.assert_array_equal(view, [3, 3, 3, 3])


def test_dlpack_export_shares_memory(cpu):
    buf = cpu.allocate("f64", (3, 2))
    arr = np.from_dlpack(buf)
    assert arr.ctypes.data == buf.data_ptr
    assert arr.shape == (3, 2) and arr.dtype == np.float64
    view = buf.numpy()
    view[2, 1] = 7  # numpy marks DLPack imports read-only; write through a view
    assert arr[2, 1] == 7
    assert buf.__dlpack_device__() == (1, 0)
    # The export keeps the memory after the buffer handle goes.
    buf.release()
    del buf, view
    gc.collect()
    assert arr.sum() == 7


def test_from_dlpack_shares_memory_and_keeps_the_producer_alive(add):
    a = np.arange(16, dtype=np.float32)
    refs = sys.getrefcount(a)
    buf = svod.from_dlpack(a)
    assert buf.data_ptr == a.ctypes.data
    assert buf.shape == (16,) and buf.dtype == "f32"
    assert sys.getrefcount(a) > refs  # the buffer holds the producer
    del a
    gc.collect()
    # The producer is still alive through the buffer.
    view = buf.numpy()
    np.testing.assert_array_equal(view, np.arange(16))
    out = np.zeros(16, np.float32)
    add(out, buf, buf, 16)
    np.testing.assert_array_equal(out, 2 * np.arange(16))
    producer = np.ones(4, np.float32)
    before = sys.getrefcount(producer)
    b = svod.from_dlpack(producer)
    b.release()
    del b
    gc.collect()
    assert sys.getrefcount(producer) == before  # released: the producer is given back


def test_from_dlpack_round_trip_pointer_identity(cpu):
    buf = cpu.allocate("u8", 64)
    again = svod.from_dlpack(buf)
    assert again.data_ptr == buf.data_ptr
    again.numpy()[3] = 9
    assert buf.numpy()[3] == 9


def test_from_dlpack_refusals():
    with pytest.raises(svod.ValidationError, match="has no __dlpack__"):
        svod.from_dlpack([1, 2, 3])
    with pytest.raises(svod.ValidationError, match="no svod element type"):
        svod.from_dlpack(np.zeros(3, np.complex64))
    with pytest.raises((svod.ValidationError, BufferError)):
        svod.from_dlpack(np.zeros((4, 4), np.float32)[:, ::2])


class _Producer:
    """A hand-made DLPack producer of an f32 tensor of any shape over `array`'s memory (no deleter)."""

    def __init__(self, array, shape):
        self.array = array
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.tensor = DLManagedTensor()
        t = self.tensor.dl_tensor
        t.data = array.ctypes.data
        t.device = DLDevice(1, 0)  # kDLCPU
        t.ndim = len(shape)
        t.dtype = DLDataType(2, 32, 1)  # kDLFloat, 32 bits
        t.shape = self.shape

    def __dlpack__(self, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.tensor), b"dltensor", None)


def test_from_dlpack_refuses_shapes_past_64_bits_and_negative_ones():
    memory = np.arange(4, dtype=np.float32)
    fine = _Producer(memory, (2, 2))
    buf = svod.from_dlpack(fine)
    assert buf.shape == (2, 2) and buf.count == 4 and buf.data_ptr == memory.ctypes.data
    del buf
    with pytest.raises(svod.ValidationError, match="more bytes than fit in 64 bits"):
        svod.from_dlpack(_Producer(memory, (2**32, 2**32)))  # wrapped to 0 elements
    with pytest.raises(svod.ValidationError, match="more bytes than fit in 64 bits"):
        svod.from_dlpack(_Producer(memory, (2**62,)))  # 2^64 bytes
    with pytest.raises(svod.ValidationError, match="dimension 1 is -4"):
        svod.from_dlpack(_Producer(memory, (1, -4)))


def test_asbuffer(add):
    a = np.arange(8, dtype=np.float32)
    buf = svod.asbuffer(a)
    assert buf.data_ptr == a.ctypes.data and buf.shape == (8,)
    out = np.zeros(8, np.float32)
    add(out, buf, a, 8)
    np.testing.assert_array_equal(out, 2 * a)


def test_repr(cpu):
    assert repr(cpu.allocate("f32", 3)) == "svod.Buffer(dtype=f32, shape=(3,), device=CPU)"
    assert repr(cpu) == "svod.Device(CPU)"


def test_a_view_must_start_on_an_element_boundary(cpu):
    # Buffer.view(1, 4) of an f32 buffer used to give kernels a misaligned float* (issue 35).
    b = cpu.allocate("f32", 16)
    with pytest.raises(svod.ValidationError, match=r"a f32 view at byte 1 of its base is misaligned: f32 elements "
                                                   r"must start at a multiple of 4 bytes"):
        b.view(1, 4)
    with pytest.raises(svod.ValidationError, match="misaligned"):
        b.view(4, 2, "f64")
    assert b.view(4, 4).to_numpy().shape == (4,)
    assert b.view(1, 3, "u8").to_numpy().shape == (3,)


def test_numpy_dtype_beside_svods_name(cpu):
    # dtype stays svod's name (bf16 has no numpy dtype); numpy_dtype is numpy()'s.
    buf = cpu.allocate(np.float32, 4)
    assert buf.dtype == "f32" and buf.numpy_dtype == np.dtype(np.float32) == buf.numpy().dtype
    bf = cpu.allocate("bf16", 4)
    assert bf.dtype == "bf16" and bf.numpy_dtype == np.dtype(np.uint16) == bf.numpy().dtype
    assert cpu.allocate("i64", 2).numpy_dtype == np.int64
