"""What a compiler's runtime needs from svod: launch sizes per call, buffer views, untyped byte
storage, svod.Buffer arguments, compiling many programs at once, capture and the caching
allocator (issue 23). Each with the bad input it must refuse."""
import numpy as np
import pytest

import svod

# Each core_id slice writes the elements i = core_id (mod slices).
STRIDED = """
void strided(float* restrict o, int n, int slices, int core_id) {
  for (int i = core_id; i < n; i += slices) o[i] = (float)i * 2.0f;
}
"""


@pytest.fixture(scope="module")
def strided(cpu):
    return cpu.compile(source=STRIDED, entry="strided",
                       buffers=[{"name": "o", "access": "write", "dtype": "f32", "min_count": "n"}],
                       scalars=[{"name": "n", "type": "i32"}, {"name": "slices", "type": "i32"},
                                {"name": "core_id", "type": "i32", "min": 0, "max": 7}])


def test_global_size_per_call_sets_the_core_id_slices_without_recompiling(strided):
    for slices in (1, 3, 8):
        o = np.zeros(20, np.float32)
        strided(o, 20, slices, global_size=slices)
        np.testing.assert_array_equal(o, np.arange(20, dtype=np.float32) * 2)
    o = np.zeros(20, np.float32)
    strided(o, 20, 4, global_size=(4, 1, 1), local_size=(1, 1, 1))
    np.testing.assert_array_equal(o, np.arange(20, dtype=np.float32) * 2)
    # Without global_size= the spec's size (1) runs: slice 0 only.
    o = np.zeros(8, np.float32)
    strided(o, 8, 2)
    np.testing.assert_array_equal(o[::2], np.arange(0, 8, 2, dtype=np.float32) * 2)
    assert not o[1::2].any()


@pytest.mark.parametrize("size, message", [
    (9, r"9 core_id slices would pass core_id = 8, outside its bounds \[0, 7\]"),
    (0, "global_size: dimension 0 is 0; launch sizes are at least 1"),
    ((2, 2), r"global_size \(2, 2, 1\): the CPU runs global_size\[0\] core_id slices"),
    ((1, 1, 1, 1), "expected 1 to 3 dimensions, got 4"),
    ("4", "expected an integer or a tuple of integers, got str"),
    ((1.5,), r"global_size\[0\]: expected an integer, got float"),
])
def test_bad_launch_sizes_are_refused_before_anything_runs(strided, size, message):
    o = np.zeros(20, np.float32)
    with pytest.raises(svod.ValidationError, match=message):
        strided(o, 20, 1, global_size=size)
    assert not o.any()


def test_a_program_parameter_named_global_size_keeps_its_name(cpu):
    p = cpu.compile(source="void g(int* o, int global_size) { o[0] = global_size; }", entry="g",
                    buffers=[{"name": "o", "access": "write", "dtype": "i32"}],
                    scalars=[{"name": "global_size", "type": "i32"}])
    o = np.zeros(1, np.int32)
    p(o, global_size=7)
    assert o[0] == 7


def test_views_share_memory_and_work_in_calls_copies_and_dlpack(cpu, strided):
    base = cpu.allocate("f32", 32)
    view = base.view(8 * 4, 16)
    assert (view.dtype, view.count, view.shape, view.nbytes) == ("f32", 16, (16,), 64)
    strided(view, 16, 2, global_size=2)
    expect = np.zeros(32, np.float32)
    expect[8:24] = np.arange(16) * 2
    np.testing.assert_array_equal(base.numpy(), expect)
    # Views of views, in another dtype, through numpy, DLPack and copy_from.
    words = base.view(8 * 4, 16, "i32").view(4, 2)
    assert list(np.asarray(words)) == list(expect[9:11].view(np.int32))
    assert np.from_dlpack(view)[3] == 6
    view.view(0, 4).copy_from(np.full(4, -1, np.float32))
    assert list(base.numpy()[7:13]) == [0, -1, -1, -1, -1, 8]


@pytest.mark.parametrize("offset, count, dtype, message", [
    (30 * 4, 4, None, r"4 f32 elements \(16 bytes\) at byte offset 120 leave the buffer of 128 bytes"),
    (129, 0, None, "at byte offset 129 leave the buffer"),
    (0, 2**62, None, "more bytes than fit in 64 bits"),
    (0, 1, "complex128", "complex128"),
])
def test_a_view_past_the_end_or_of_no_svod_type_is_refused(cpu, offset, count, dtype, message):
    with pytest.raises(svod.ValidationError, match=message):
        cpu.allocate("f32", 32).view(offset, count, dtype)


def test_byte_storage_serves_any_declared_dtype_when_aligned_and_big_enough(cpu, strided):
    raw = cpu.allocate("u8", 80)
    strided(raw, 20, 1)
    np.testing.assert_array_equal(raw.numpy().view(np.float32), np.arange(20, dtype=np.float32) * 2)
    strided(raw.view(4, 76), 19, 1)  # 4-byte aligned
    as_bytes = np.zeros(80, np.uint8)
    strided(as_bytes, 20, 1)  # a numpy byte array too
    np.testing.assert_array_equal(as_bytes.view(np.float32)[:3], [0, 2, 4])
    with pytest.raises(svod.ValidationError, match=r"u8 storage at address/offset 0x[0-9a-f]+ is not aligned to the "
                                                   r"declared f32's 4 bytes"):
        strided(raw.view(2, 76), 19, 1)
    with pytest.raises(svod.ValidationError, match="holds 80 bytes but the launch needs 84"):
        strided(raw, 21, 1)
    with pytest.raises(svod.ValidationError, match="dtype i8 does not match the declared f32"):
        strided(cpu.allocate("i8", 80), 20, 1)


def test_svod_buffer_arguments_stay_alive_and_released_ones_are_refused(cpu, strided):
    b = cpu.allocate("f32", 8)
    strided(b, 8, 1)
    assert b.numpy()[7] == 14
    b.release()
    with pytest.raises(svod.ValidationError, match="used after release"):
        strided(b, 8, 1)


SCALE = """
void scale(float* restrict o, const float* restrict a, int n, int k) {
  for (int i = 0; i < n; i++) o[i] = a[i] * (float)k;
}
"""


@pytest.fixture(scope="module")
def scale(cpu):
    return cpu.compile(source=SCALE, entry="scale",
                       buffers=[{"name": "o", "access": "write", "dtype": "f32", "min_count": "n"},
                                {"name": "a", "dtype": "f32", "min_count": "n"}],
                       scalars=[{"name": "n", "type": "i32", "min": 0, "max": 1 << 20}, {"name": "k", "type": "i32"}])


def test_compile_many_returns_programs_in_order_and_reports_each_failure(cpu):
    def spec(entry, body):
        return {"source": f"void {entry}(int* o) {{ {body} }}", "entry": entry,
                "buffers": [{"name": "o", "access": "write", "dtype": "i32"}]}
    programs = cpu.compile_many([spec(f"k{i}", f"o[0] = {i};") for i in range(6)])
    for i, p in enumerate(programs):
        o = np.zeros(1, np.int32)
        p(o)
        assert (p.name, o[0]) == (f"k{i}", i)
    mixed = cpu.compile_many([spec("good", "o[0] = 1;"), spec("bad", "o[0] = ;")], errors="return")
    assert isinstance(mixed[0], svod.Program)
    assert isinstance(mixed[1], svod.CompileError) and "expected expression" in mixed[1].log
    with pytest.raises(svod.CompileError, match="bad"):
        cpu.compile_many([spec("good", "o[0] = 1;"), spec("bad", "o[0] = ;")])
    with pytest.raises(svod.ValidationError, match=r"compile_many: programs\[1\]: unknown argument \"entri\""):
        cpu.compile_many([spec("good", ""), {"source": "", "entri": "x"}])
    with pytest.raises(svod.ValidationError, match=r"programs\[0\]: expected a dict"):
        cpu.compile_many(["void f() {}"])
    with pytest.raises(svod.ValidationError, match='errors= is "raise" or "return"'):
        cpu.compile_many([], errors="ignore")


def test_capture_records_calls_and_copies_into_a_plan_that_rebinds_and_takes_variables(cpu, scale):
    x = cpu.allocate("f32", 64)
    x.copy_from(np.arange(64, dtype=np.float32))
    y, z = cpu.allocate("f32", 64), cpu.allocate("f32", 64)
    with cpu.capture() as g:
        n = g.variable("n", 64, min=1, max=64)
        scale(y, x, n, 3)                      # recorded, not run
        z.copy_from(y)
        scale(z.view(0, 32), z.view(0, 32), "n / 2", 2)
    assert not y.numpy().any() and not z.numpy().any()
    plan = g.plan
    assert plan.op_count == 3
    plan.execute()
    expect = np.arange(64, dtype=np.float32) * 3
    np.testing.assert_array_equal(y.numpy(), expect)
    np.testing.assert_array_equal(z.numpy(), np.concatenate([expect[:32] * 2, expect[32:]]))
    # New input and output storages, a smaller n: the views follow their storage.
    x2, z2 = cpu.allocate("f32", 64), cpu.allocate("f32", 64)
    x2.copy_from(np.ones(64, np.float32))
    plan.rebind(g.slot(x), x2)
    plan.rebind(g.slot(z), z2)
    plan.execute(vars={"n": 8})
    np.testing.assert_array_equal(z2.numpy()[:8], [6, 6, 6, 6, 3, 3, 3, 3])
    np.testing.assert_array_equal(z2.numpy()[8:], expect[8:])  # y beyond n, from the first run, copied
    with pytest.raises(svod.ValidationError, match=r"vars\[\"n\"\] = 65 is outside|65"):
        plan.execute(vars={"n": 65})


def test_capture_variables_are_checked_where_they_are_declared(cpu, scale):
    # rank and world_size were accepted, and a bad declaration surfaced only at __exit__, losing the
    # whole capture (issue 35): now the call that declares it raises, and the capture goes on.
    x, y = cpu.allocate("f32", 16), cpu.allocate("f32", 16)
    with cpu.capture() as g:
        for name in ("rank", "world_size"):
            with pytest.raises(svod.ValidationError, match=f'plan variable "{name}" is reserved'):
                g.variable(name, 0)
        n = g.variable("n", 16, min=1, max=16)
        with pytest.raises(svod.ValidationError, match='"n" is declared twice'):
            g.variable("n", 4)
        with pytest.raises(svod.ValidationError, match="empty bounds"):
            g.variable("m", 1, min=2, max=1)
        with pytest.raises(svod.ValidationError, match="17"):
            g.variable("k", 17, min=1, max=16)
        scale(y, x, n, 2)
    assert g.plan.op_count == 1 and g.plan.variables == {"n": 16}


def test_a_captured_plan_refuses_a_wrong_replacement(cpu, scale):
    x, y = cpu.allocate("f32", 16), cpu.allocate("f32", 16)
    with cpu.capture() as g:
        scale(y, x, 16, 2)
    # A captured storage is byte storage: any buffer of its size and alignment replaces it.
    g.plan.rebind(g.slot(x), cpu.allocate("i32", 16))
    with pytest.raises(svod.ValidationError, match="holds 64 bytes"):
        g.plan.rebind(g.slot(x), cpu.allocate("u8", 60))
    with pytest.raises(svod.ValidationError, match="is byte storage aligned to 8 bytes; the replacement at 0x[0-9a-f]+ is not"):
        g.plan.rebind(g.slot(x), cpu.allocate("u8", 68).view(2, 64))
    with pytest.raises(svod.ValidationError, match="out of range"):
        g.plan.rebind(99, x)
    with pytest.raises(svod.ValidationError, match="not used by any recorded call"):
        g.slot(cpu.allocate("f32", 1))


def test_capture_refuses_what_a_plan_cannot_hold(cpu, scale):
    x, y = cpu.allocate("f32", 16), cpu.allocate("f32", 16)
    with pytest.raises(svod.ValidationError, match="a capture records svod.Buffers"):
        with cpu.capture():
            scale(y, np.zeros(16, np.float32), 16, 2)
    with cpu.capture() as g:  # numpy integers are integers
        scale(y, x, np.int64(16), np.int32(2))
    g.plan.execute()
    with pytest.raises(svod.ValidationError, match="outside the 64-bit integer range"):
        with cpu.capture():
            scale(y, x, 2**70, 2)
    with pytest.raises(svod.ValidationError, match="uses \"m\", which is neither a plan variable"):
        with cpu.capture():
            scale(y, x, "m", 2)
    with pytest.raises(svod.ValidationError, match="already capturing"):
        with cpu.capture():
            with cpu.capture():
                pass
    g = cpu.capture()
    with g:
        pass
    with pytest.raises(svod.ValidationError, match="records one block"):
        with g:
            pass
    with pytest.raises(svod.ValidationError, match="after the with block"):
        cpu.capture().plan
    # Ended from another thread: refused (the thread that started it ends it).
    import threading
    g = cpu.capture()
    g.__enter__()
    errors = []

    def end_elsewhere():
        try:
            g.__exit__(None, None, None)
        except svod.ValidationError as e:
            errors.append(str(e))

    t = threading.Thread(target=end_elsewhere)
    t.start()
    t.join()
    assert errors and "the thread that started it" in errors[0]
    g.__exit__(None, None, None)
    # Outside a capture, calls run again.
    x.copy_from(np.ones(16, np.float32))
    scale(y, x, 16, 2)
    assert (y.numpy() == 2).all()


def test_plan_builder_takes_launch_sizes_over_variables(cpu, strided):
    o = cpu.allocate("f32", 32)
    b = svod.PlanBuilder()
    slot = b.add_buffer(o, "o")
    b.add_variable("n", 32, min=1, max=32)
    b.add_variable("t", 4, min=1, max=8)
    b.run(strided, [slot], ["n", "t"], global_size=("t", 1, 1))
    plan = b.build()
    plan.execute()
    np.testing.assert_array_equal(o.numpy(), np.arange(32, dtype=np.float32) * 2)
    o.copy_from(np.zeros(32, np.float32))
    plan.execute(vars={"t": 8})
    np.testing.assert_array_equal(o.numpy(), np.arange(32, dtype=np.float32) * 2)
    with pytest.raises(svod.ValidationError, match="expected 1 to 3 dimensions"):
        svod.PlanBuilder().run(strided, [0], ["n", "t"], global_size=(1, 1, 1, 1))
    # A typed slot takes its own dtype (or byte storage) only.
    with pytest.raises(svod.ValidationError, match="dtype i32 does not match the plan's f32"):
        plan.rebind(slot, cpu.allocate("i32", 32))
    plan.rebind("o", cpu.allocate("u8", 128))


def test_cached_allocations_reuse_freed_blocks_of_the_same_size(cpu):
    svod.free_cached()
    a = cpu.allocate("f32", 1000, zero=False)
    address = a.data_ptr
    a.numpy()[:] = 7
    del a
    b = cpu.allocate("u8", 4000, zero=False)  # the same byte size, another dtype
    assert b.data_ptr == address and b.numpy().view(np.float32)[0] == 7
    c = cpu.allocate("f32", 1000, zero=False)  # the block is taken: a new one
    assert c.data_ptr != address
    del b, c
    svod.free_cached()
    assert cpu.allocate("f32", 1000).numpy().sum() == 0  # zero=True never reuses
    with pytest.raises(svod.ValidationError, match="more bytes than fit in 64 bits"):
        cpu.allocate("f32", 2**62, zero=False)


def test_read_only_arrays_are_never_written_whatever_wraps_them(cpu, scale):
    """Issue 24: svod.asbuffer(a) and PlanBuilder.add_buffer(a) let a kernel write a read-only
    array (an immutable bytes object changed). Now every path that would write one refuses."""
    data = bytes(np.arange(16, dtype=np.float32).tobytes())
    frozen = np.frombuffer(data, np.float32)
    assert not frozen.flags.writeable
    wrapped = svod.asbuffer(frozen)
    ok = cpu.allocate("f32", 16)
    scale(ok, wrapped, 16, 2)  # read: fine
    np.testing.assert_array_equal(ok.numpy(), np.arange(16) * 2)
    with pytest.raises(svod.ValidationError, match=r'buffer 0 \("o"\).*read-only'):
        scale(wrapped, ok, 16, 2)
    with pytest.raises(svod.ValidationError, match="copy_from: the destination: the memory is read-only"):
        wrapped.copy_from(np.zeros(16, np.float32))
    b = svod.PlanBuilder()
    ro = b.add_buffer(frozen, "frozen")
    rw = b.add_buffer(np.zeros(16, np.float32), "rw")
    b.run(scale, [ro, rw], [16, 2])
    with pytest.raises(svod.ValidationError, match=r'op 0 kernel scale writes buffer 0 \("frozen"\): the memory is read-only'):
        b.build()
    b = svod.PlanBuilder()
    out = b.add_buffer(np.zeros(16, np.float32), "out")
    b.run(scale, [out, b.add_buffer(frozen, "in")], [16, 2])
    plan = b.build()
    with pytest.raises(svod.ValidationError, match="read-only"):
        plan.rebind("out", wrapped)
    plan.execute()  # the failed rebind left the plan as it was
    assert data == np.arange(16, dtype=np.float32).tobytes()
