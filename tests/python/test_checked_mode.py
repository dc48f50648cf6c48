"""Checked mode covers every buffer (issue 35, item 2): under svod.checked(), numpy arrays, DLPack
tensors, svod.asbuffer() wrappers, views and buffers allocated before the block run on guarded copies,
so an access past either end of any argument (up to the argument's own size beyond it) fails the launch
naming the buffer and element, and a write into the slack before the guard fails it too; the caller's
memory is left as it was. What it cannot see: an access further out than that, a read of the slack (up to 15
bytes when a size is not a multiple of 16) or of the data's first page before its start, and arguments
that partly overlap another."""
import json
import platform
import threading

import numpy as np
import pytest

import svod

pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="faults are stopped on x86-64 only")

WRITE_N = "void k(float* o, const float* a, int n) { for (int i = 0; i < n; i++) o[i] = a[i] + 1.0f; }"
BUFFERS = [{"name": "o", "access": "write", "dtype": "f32"}, {"name": "a", "dtype": "f32"}]


@pytest.fixture(scope="module")
def k(cpu):
    return cpu.compile(source=WRITE_N, entry="k", buffers=BUFFERS, scalars=[{"name": "n", "type": "i32"}])


def overrun_is_caught(k, o, a, n, buffer, element):
    with pytest.raises(svod.KernelFault) as info:
        k(o, a, n)
    assert info.value.cause == "out of bounds (checked mode)", str(info.value)
    assert info.value.buffer == buffer and info.value.element == element, str(info.value)


def test_numpy_arrays_are_guarded_and_left_as_they_were(k):
    # (Outside checked mode the same overrun writes past the array's end into numpy's heap.)
    o, a = np.zeros(1024, np.float32), np.ones(2048, np.float32)
    with svod.checked():
        overrun_is_caught(k, o, a, 1025, 0, 1024)
        assert not o.any()  # the launch failed on the copy: the array is as it was
        k(o, a, 1024)
    np.testing.assert_array_equal(o, 2.0)


def test_a_write_half_the_array_past_its_end_is_caught(cpu):
    # Two pages past the end of a four-page array: a guard of one page used to let it through into
    # whatever memory came next.
    k = cpu.compile(source="void k(float* o, int n) { o[n + n / 2] = 1.0f; }", entry="k",
                    buffers=BUFFERS[:1], scalars=[{"name": "n", "type": "i32"}])
    o = np.zeros(4096, np.float32)
    with svod.checked():
        with pytest.raises(svod.KernelFault) as info:
            k(o, 4096)
    assert info.value.cause == "out of bounds (checked mode)", str(info.value)
    assert info.value.buffer == 0 and info.value.element == 6144, str(info.value)
    assert not o.any()


def test_a_write_into_the_slack_fails_the_launch_naming_the_element(k):
    o, a = np.zeros(1023, np.float32), np.ones(1024, np.float32)  # 4092 bytes: 4 bytes of slack
    with svod.checked():
        with pytest.raises(svod.ExecutionError, match=r'wrote just outside buffer 0 \("o", f32\[1023\]\), at '
                                                      r'element 1023 \(byte offset 4092\)'):
            k(o, a, 1024)
    assert not o.any()


def test_buffers_made_before_the_block_asbuffer_views_and_dlpack_are_guarded(cpu, k):
    torch = pytest.importorskip("torch")
    early = cpu.allocate("f32", 256)
    a = np.ones(512, np.float32)
    with svod.checked():
        overrun_is_caught(k, early, a, 257, 0, 256)
        overrun_is_caught(k, svod.asbuffer(np.zeros(256, np.float32)), a, 257, 0, 256)
        overrun_is_caught(k, early.view(0, 128), a, 129, 0, 128)
        overrun_is_caught(k, svod.from_dlpack(torch.zeros(256)), a, 257, 0, 256)
        t = torch.zeros(256)
        overrun_is_caught(k, t, a, 257, 0, 256)
        k(t, a, 256)
        assert float(t.sum()) == 512.0


def test_a_read_before_the_start_is_caught_once_it_leaves_the_first_page(cpu):
    # The data ends where the trailing guard starts, so a read just before the start stays in the
    # data's first page (canaries, which only a write changes); 4 KiB before it is the leading guard.
    k = cpu.compile(source="void k(float* o, const float* a) { o[0] = a[-1024]; }", entry="k", buffers=BUFFERS)
    with svod.checked():
        with pytest.raises(svod.KernelFault) as info:
            k(np.zeros(4, np.float32), np.ones(4, np.float32))
    assert info.value.buffer == 1 and info.value.element == -1024 and info.value.access == "read"


def test_an_in_place_kernel_sees_one_copy(cpu):
    k = cpu.compile(source="void k(float* o, const float* a) { for (int i = 0; i < 8; i++) o[i] = a[i] * 2; }",
                    entry="k", buffers=BUFFERS)
    x = np.arange(8, dtype=np.float32)
    with svod.checked():
        k(x, x)
    np.testing.assert_array_equal(x, np.arange(8) * 2)
    # The read-only argument first: the copy still goes back, as the other argument writes it.
    k2 = cpu.compile(source="void k2(const float* a, float* o) { for (int i = 0; i < 8; i++) o[i] = a[i] + 1; }",
                     entry="k2", buffers=[{"name": "a", "dtype": "f32"}, {"name": "o", "access": "write", "dtype": "f32"}])
    with svod.checked():
        k2(x, x)
    np.testing.assert_array_equal(x, np.arange(8) * 2 + 1)


def test_plans_run_their_kernels_on_guarded_copies_of_bound_arrays(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({
        "svod_plan": 1, "buffers": {"o": {"dtype": "f32", "count": 1024}},
        "programs": {"k": {"language": "c", "entry": "k",
                           "source": "void k(float* o) { for (int i = 0; i <= 1024; i++) o[i] = i; }",
                           "buffers": [{"name": "o", "access": "write", "dtype": "f32"}]}},
        "ops": [{"id": "fill", "run": "k", "buffers": ["o"]}], "outputs": {"o": {}}}))
    plan = svod.load_plan(path)  # its own buffer is not guarded: made outside checked mode
    arr = np.zeros(1024, np.float32)
    with svod.checked():
        with pytest.raises(svod.KernelFault, match=r'op 0 \(fill\) kernel k failed') as info:
            plan.run(o=arr)
    assert info.value.op == 0 and info.value.buffer == 0 and info.value.element == 1024
    assert not arr.any()


def test_blocks_in_two_threads_keep_the_mode_while_either_is_open_and_restore_it_after():
    # Thread A opens, B opens, A closes, B closes: A used to turn the mode off under B, and B to
    # leave it on for good (issue 40).
    before = svod._svod._check_mode()
    steps = [threading.Event() for _ in range(3)]
    seen = {}

    def a():
        with svod.checked():
            steps[0].set()
            steps[1].wait(30)
        seen["after a"] = svod._svod._check_mode()
        steps[2].set()

    def b():
        steps[0].wait(30)
        with svod.checked("nan"):
            seen["both"] = svod._svod._check_mode()
            steps[1].set()
            steps[2].wait(30)
            seen["b alone"] = svod._svod._check_mode()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    [t.start() for t in threads]
    [t.join(60) for t in threads]
    assert seen == {"both": "memory,nan", "after a": "nan", "b alone": "nan"}
    assert svod._svod._check_mode() == before
    with pytest.raises(svod.ValidationError, match="bogus"):
        with svod.checked("bogus"):
            pass
    assert svod._svod._check_mode() == before
