"""Compiling and calling programs: zero-copy numpy arguments and every check before a launch."""
import gc
import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import svod
from conftest import ADD_BUFFERS, ADD_SOURCE, arrays


def test_version_and_devices():
    assert svod.__version__.count(".") == 2
    listed = {d.name: d for d in svod.devices()}
    assert listed["CPU"].available
    for d in listed.values():
        assert d.description
    for name, d in listed.items():
        if d.available:
            assert svod.device(name).name == name
        elif ":" not in name:  # a kind with no device: the description says why
            with pytest.raises(svod.DeviceUnavailableError):
                svod.device(f"{name}:0")


def test_kernel_writes_into_the_numpy_array(add):
    o, a, b = arrays(1000)
    add(o, a, b, 1000)
    np.testing.assert_array_equal(o, a + b)
    o2 = np.zeros_like(o)
    add(o2, a, b, n=500)
    np.testing.assert_array_equal(o2[:500], (a + b)[:500])
    assert not o2[500:].any()


def test_keyword_buffers_and_scalars(add):
    o, a, b = arrays()
    add(b=b, a=a, o=o, n=16)
    np.testing.assert_array_equal(o, a + b)


def test_program_describes_itself(add):
    assert add.name == "add" and add.entry == "add" and add.device == "CPU"
    assert [b["name"] for b in add.buffers] == ["o", "a", "b"]
    assert add.buffers[0]["access"] == "write"
    assert add.scalars[0]["name"] == "n" and add.scalars[0]["max"] == 1 << 20
    assert add.entry_address


def test_defines_global_size_and_core_id(cpu):
    prog = cpu.compile(
        source="void fill(int* o, int n, int core_id) { for (int i = core_id * CH; i < (core_id + 1) * CH && i < n; i++) o[i] = core_id * 100 + V; }",
        entry="fill", buffers=[{"name": "o", "access": "write", "dtype": "i32"}],
        scalars=[{"name": "n", "type": "i32"}, {"name": "core_id", "type": "i32"}],
        global_size=["(n + 7) / 8"], defines={"CH": 8, "V": 7})
    o = np.zeros(20, np.int32)
    prog(o, 20)
    np.testing.assert_array_equal(o, (np.arange(20) // 8) * 100 + 7)


def test_dtype_mismatch_is_a_validation_error(add):
    o, a, b = arrays()
    with pytest.raises(svod.ValidationError, match=r'buffer 1 \("a"\): dtype f64 does not match the declared f32'):
        add(o, a.astype(np.float64), b, 16)
    with pytest.raises(svod.ValidationError, match="no svod element type"):
        add(o, np.array(["x"] * 16), b, 16)
    with pytest.raises(svod.ValidationError, match="no svod element type"):
        add(o, np.empty(16, dtype=object), b, 16)


def test_counts_are_checked(add):
    o, a, b = arrays()
    with pytest.raises(svod.ValidationError, match="takes 3 buffers and 1 scalars"):
        add(o, a, b, 16, 17)
    with pytest.raises(svod.ValidationError, match=r'scalar 0 \("n"\): missing'):
        add(o, a, b)
    with pytest.raises(svod.ValidationError, match=r'buffer 2 \("b"\): missing'):
        add(o, a, n=16)
    with pytest.raises(svod.ValidationError, match='no parameter named "m"'):
        add(o, a, b, m=16)
    with pytest.raises(svod.ValidationError, match="given twice"):
        add(o, a, b, 16, n=16)


def test_layout_and_writability_are_checked(add):
    o, a, b = arrays(32)
    with pytest.raises(svod.ValidationError, match="not C-contiguous"):
        add(o[::2], a[:16], b[:16], 16)
    ro = np.zeros(16, np.float32)
    ro.flags.writeable = False
    with pytest.raises(svod.ValidationError, match=r'buffer 0 \("o"\): the kernel writes it but the array is read-only'):
        add(ro, a[:16], b[:16], 16)
    # Read-only inputs are fine.
    a_ro = a[:16].copy()
    a_ro.flags.writeable = False
    out = np.zeros(16, np.float32)
    add(out, a_ro, b[:16], 16)
    np.testing.assert_array_equal(out, a_ro + b[:16])
    unaligned = np.frombuffer(bytearray(65), dtype=np.uint8)[1:].view(np.float32)
    with pytest.raises(svod.ValidationError, match="not aligned"):
        add(out, unaligned, b[:16], 16)
    swapped = a[:16].astype(">f4")
    with pytest.raises(svod.ValidationError):
        add(out, swapped, b[:16], 16)


def test_scalars_are_checked(add):
    o, a, b = arrays()
    with pytest.raises(svod.ValidationError, match=r"outside"):
        add(o, a, b, 1 << 21)  # declared max 2^20
    with pytest.raises(svod.ValidationError, match="outside"):
        add(o, a, b, -1)  # declared min 0
    with pytest.raises(svod.ValidationError, match="64-bit integer range"):
        add(o, a, b, 1 << 70)
    with pytest.raises(svod.ValidationError, match="expected an integer, got float"):
        add(o, a, b, 1.5)
    with pytest.raises(svod.ValidationError, match="expected an integer, got bool"):
        add(o, a, b, True)
    add(o, a, b, np.int64(16))  # numpy integers are integers
    np.testing.assert_array_equal(o, a + b)


def test_i32_range_is_checked(cpu):
    prog = cpu.compile(source="void k(int* o, int n) { o[0] = n; }", entry="k",
                       buffers=[{"name": "o", "access": "write"}], scalars=[{"name": "n", "type": "i32"}])
    o = np.zeros(1, np.int32)
    prog(o, 2**31 - 1)
    assert o[0] == 2**31 - 1
    with pytest.raises(svod.ValidationError):
        prog(o, 2**31)


def test_sizes_are_checked_against_min_count(add_sized):
    o, a, b = arrays(16)
    with pytest.raises(svod.ValidationError, match=r'buffer 0 \("o"\): holds 64 bytes but the launch needs 68'):
        add_sized(o, a, b, 17)
    add_sized(o, a, b, 16)
    np.testing.assert_array_equal(o, a + b)


def test_min_count_whose_bytes_overflow_is_refused(cpu):
    # o[n - 1] with n = 2^62: 2^64 bytes of f32 wrapped to 0 and the kernel wrote before the array.
    prog = cpu.compile(source="void last(float* o, long long n) { o[n - 1] = 7.0f; }", entry="last",
                       buffers=[{"name": "o", "access": "write", "dtype": "f32", "min_count": "n"}],
                       scalars=[{"name": "n", "type": "i64"}])
    memory = np.zeros(8, np.float32)
    with pytest.raises(svod.ValidationError, match=r'program "last": buffer 0 \("o"\) needs 2\^62 f32 elements '
                                                   r'\(min_count "n"\): more bytes than fit in 64 bits'):
        prog(memory[4:], 2**62)
    assert not memory.any()
    prog(memory[4:], 4)
    assert memory[7] == 7.0


def test_min_count_names_only_the_programs_scalars(cpu):
    with pytest.raises(svod.ValidationError, match=r'buffers\[0\].min_count: unknown variable "m"'):
        cpu.compile(source="void k(float* o, int n) {}", entry="k",
                    buffers=[{"name": "o", "dtype": "f32", "min_count": "m"}], scalars=[{"name": "n", "type": "i32"}])


def test_core_id_slices_stay_within_its_bounds(cpu):
    prog = cpu.compile(source="void mark(int* restrict o, int n, int core_id) { o[core_id] = 1; }", entry="mark",
                       buffers=[{"name": "o", "access": "write", "dtype": "i32"}],
                       scalars=[{"name": "n", "type": "i64"}, {"name": "core_id", "type": "i32", "min": 0, "max": 3}],
                       global_size=["n"])
    o = np.zeros(4, np.int32)
    with pytest.raises(svod.ValidationError, match=r"5 core_id slices would pass core_id = 4, outside its bounds \[0, 3\]"):
        prog(o, 5)
    assert not o.any()
    prog(o, 4)
    assert o.tolist() == [1, 1, 1, 1]


def test_wrong_argument_types(add):
    o, a, b = arrays()
    with pytest.raises(svod.ValidationError, match=r'buffer 1 \("a"\): expected a numpy array, a svod.Buffer or an object with __dlpack__, got list'):
        add(o, [1.0] * 16, b, 16)


def test_a_failed_check_writes_nothing(add):
    o, a, b = arrays()
    with pytest.raises(svod.ValidationError):
        add(o, a, b.astype(np.float64), 16)
    assert not o.any()


def test_svod_buffers_and_dlpack_arguments(cpu, add):
    o = cpu.allocate("f32", 16)
    a = cpu.allocate(np.float32, 16)
    a.numpy()[:] = np.arange(16)
    b = np.full(16, 2, np.float32)
    add(o, a, b, 16)
    np.testing.assert_array_equal(o.numpy(), np.arange(16) + 2)

    class Producer:  # any object with __dlpack__
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__()

    out = np.zeros(16, np.float32)
    add(Producer(out), a, b, 16)
    np.testing.assert_array_equal(out, np.arange(16) + 2)
    with pytest.raises(svod.ValidationError, match="dtype i32 does not match the declared f32"):
        add(cpu.allocate("i32", 16), a, b, 16)


def test_compile_errors(cpu, tmp_path):
    with pytest.raises(svod.CompileError) as info:
        cpu.compile(source="void broken(float* o) { this is not C }", entry="broken",
                    buffers=[{"name": "o", "access": "write"}])
    assert info.value.kind == "compile"
    assert "error" in info.value.log
    assert isinstance(info.value, svod.Error)
    with pytest.raises(svod.ValidationError, match=r"programs.k.buffers\[0\].access"):
        cpu.compile(source="void k(float* o) {}", entry="k", buffers=[{"name": "o", "access": "sideways"}])
    with pytest.raises(svod.ValidationError, match=r"unknown field"):
        cpu.compile(source="void k(float* o) {}", entry="k", buffers=[{"name": "o", "acess": "write"}])
    with pytest.raises(svod.IoError, match="cannot open"):
        cpu.compile(source_file=tmp_path / "missing.c", entry="k")
    with pytest.raises(svod.ValidationError, match='give either "source" or "source_file"'):
        cpu.compile(entry="k")
    with pytest.raises(svod.UndefinedSymbolError):
        cpu.compile(source="void k(float* o) {}", entry="not_there", buffers=[{"name": "o"}])


def test_source_file(cpu, tmp_path):
    path = tmp_path / "add.c"
    path.write_text(ADD_SOURCE)
    prog = cpu.compile(source_file=str(path), entry="add", buffers=ADD_BUFFERS, scalars=[{"name": "n", "type": "i32"}])
    o, a, b = arrays()
    prog(o, a, b, 16)
    np.testing.assert_array_equal(o, a + b)


def test_devices_errors():
    with pytest.raises(svod.ValidationError, match="unknown"):
        svod.device("TPU:0")
    with pytest.raises(svod.DeviceUnavailableError):
        svod.device("CL:99")


def test_no_reference_leak_after_100000_calls(add):
    o, a, b = arrays(4)
    for _ in range(1000):
        add(o, a, b, 4)
    gc.collect()
    before = [sys.getrefcount(x) for x in (o, a, b, add)]
    rss_before = _rss_kib()
    for _ in range(100_000):
        add(o, a, b, 4)
    gc.collect()
    assert [sys.getrefcount(x) for x in (o, a, b, add)] == before
    # 100,000 calls that each leaked even 16 bytes would grow the heap by 1.5 MiB.
    assert _rss_kib() - rss_before < 1024


def test_failing_calls_do_not_leak(add):
    o, a, b = arrays(4)
    bad = b.astype(np.float64)
    gc.collect()
    before = [sys.getrefcount(x) for x in (o, a, bad)]
    for _ in range(10_000):
        with pytest.raises(svod.ValidationError):
            add(o, a, bad, 4)
    gc.collect()
    assert [sys.getrefcount(x) for x in (o, a, bad)] == before


def _rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def test_threads_launch_concurrently(cpu):
    # Each call spins until every thread is inside the kernel at once: that can
    # only finish when the GIL is released while kernels run.
    prog = cpu.compile(
        source="""
        void meet(int* counter, int threads) {
          __atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
          long spins = 0;
          while (__atomic_load_n(counter, __ATOMIC_SEQ_CST) < threads && ++spins < 4000000000L) {}
        }""",
        entry="meet", buffers=[{"name": "counter", "access": "readwrite", "dtype": "i32"}],
        scalars=[{"name": "threads", "type": "i32"}])
    # (A svod buffer: each call would run on its own copy of a small numpy array, svod/guard/staging.h.)
    counter_buffer = cpu.allocate("i32", 1)
    counter = counter_buffer.numpy()
    errors = []

    def worker():
        try:
            prog(counter_buffer, 4)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    assert counter[0] == 4


def test_many_threads_many_calls(add):
    results = []

    def worker(k):
        o, a, b = arrays(64)
        for _ in range(2000):
            add(o, a, b, 64)
        results.append(np.array_equal(o, a + b))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


def test_benchmark(add):
    o, a, b = arrays(1024)
    r = svod.benchmark(add, [o, a, b, 1024], warmup=2, runs=20)
    assert r.runs == 20 and len(r.samples) == 20
    assert 0 < r.min <= r.median
    assert r.mean > 0 and r.stddev >= 0
    np.testing.assert_array_equal(o, a + b)
    with pytest.raises(svod.ValidationError):
        svod.benchmark(add, [o, a, b], runs=3)


TICK = "void tick(long* restrict hits, int core_id) { hits[core_id] += 1; }"
SPIN = "void spin(long* restrict hits, long n) { for (long i = 0; i < n; i++) __asm__ volatile(\"\"); hits[0] += 1; }"


def test_benchmark_takes_a_calls_global_size(cpu):
    tick = cpu.compile(TICK, entry="tick", scalars=[{"name": "core_id", "type": "i32"}])
    hits = np.zeros(4, np.int64)
    r = svod.benchmark(tick, [hits], warmup=1, runs=2, global_size=3)
    assert r.runs == 2
    assert hits.tolist() == [3, 3, 3, 0]  # three slices, each the warm-up and two timed runs


def test_benchmark_round_robin_times_candidates_in_turn_and_leaves_out_failures(cpu):
    spin = cpu.compile(SPIN, entry="spin")
    fast, slow, stuck = (np.zeros(1, np.int64) for _ in range(3))
    r = svod.benchmark_round_robin([(spin, [slow, 2_000_000]), (spin, [fast, 1000]), (spin, [stuck, 1 << 40])],
                                   runs=5, launch_timeout=0.05)
    assert r.best == 1
    assert r.errors[0] is None and r.errors[1] is None
    assert "time limit of 0.05 s" in r.errors[2] and r.results[2].runs == 0  # stopped, not waited for
    assert r.retired[0] and r.results[0].stopped_early and r.results[0].runs == 3  # 3 of 5 owed lost: sure to lose
    assert not r.retired[1] and r.results[1].runs == 5
    assert fast[0] == 1 + 5 and slow[0] == 1 + 3
    assert r.results[0].median > r.results[1].median

    # best_known retires whatever is sure to lose to it; tinygrad's candidates come with their global_size.
    tick = cpu.compile(TICK, entry="tick", scalars=[{"name": "core_id", "type": "i32"}])
    hits = np.zeros(4, np.int64)
    r = svod.benchmark_round_robin([(spin, [slow, 2_000_000]), (tick, [hits], (4,))], best_known=1e-9, warmup=0)
    assert r.retired == [True, True] and r.best is None
    assert hits.tolist() == [2, 2, 2, 2]

    with pytest.raises(svod.ValidationError, match=r"candidates\[0\]: expected \(program, args\)"):
        svod.benchmark_round_robin([(spin,)])
    with pytest.raises(svod.ValidationError, match=r"candidates\[1\]: program \"spin\" takes 2 arguments, got 1"):
        svod.benchmark_round_robin([(spin, [fast, 1]), (spin, [fast])])
    with pytest.raises(svod.ValidationError, match="early_stop_factor"):
        svod.benchmark_round_robin([(spin, [fast, 1])], early_stop=0.5)


def test_arguments_of_the_wrong_type_are_validation_errors(cpu, add):
    with pytest.raises(svod.ValidationError, match='missing argument "entry"'):
        cpu.compile(source="void k() {}")  # no entry
    # Named by its field (the JSON text path said only "not JSON values").
    with pytest.raises(svod.ArgumentTypeError, match=r"compile: programs.k.defines.A: expected a JSON value .*got object"):
        cpu.compile(source="void k() {}", entry="k", defines={"A": object()})
    # Buffer entries go to the plan-file parser as they are (min_count included).
    with pytest.raises(svod.ValidationError, match=r"programs.k.buffers\[0\]: expected an object, got an integer"):
        cpu.compile(source="void k() {}", entry="k", buffers=[1])
    with pytest.raises(svod.ValidationError):
        cpu.allocate("f32", "many")
    with pytest.raises(svod.ValidationError, match="expected a svod.Program or svod.Plan"):
        svod.benchmark("add", [])
    with pytest.raises(svod.ValidationError):
        svod.device(42)


def test_the_cpu_device_opens_no_compiler_until_one_compiles(tmp_path):
    # In a fresh interpreter (this one may have compiled already): getting the
    # device maps neither the llvm plugin nor libLLVM; the first compile does,
    # when the default compiler is llvm.
    script = (
        "import svod, sys\n"
        "maps = lambda: open('/proc/self/maps').read()\n"
        "cpu = svod.device('CPU')\n"
        "assert 'libsvod_llvm' not in maps() and 'libLLVM' not in maps(), 'opened before a compile'\n"
        f"k = cpu.compile(source={ADD_SOURCE!r}, entry='add', buffers={ADD_BUFFERS!r},\n"
        "                 scalars=[{'name': 'n', 'type': 'i32'}])\n"
        "print('llvm' if 'libsvod_llvm' in maps() else 'other')\n")
    env = dict(os.environ, SVOD_CACHE="0")
    env.pop("SVOD_CPU_COMPILER", None)
    env.pop("SVOD_CPU_BACKEND", None)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    plugin = pathlib.Path(os.environ.get("SVOD_BINARY_DIR", "/nonexistent")) / "runtime" / "libsvod_llvm.so"
    assert r.stdout.strip() == ("llvm" if plugin.exists() else "other")


def test_parameters_are_read_from_the_c_source_when_left_out(cpu):
    # Before: compile() without buffers= took 0 buffers and the call failed ("takes 0 buffers").
    prog = cpu.compile(source=ADD_SOURCE, entry="add")
    assert prog.buffers == [{"name": "o", "access": "readwrite", "dtype": "f32"},
                            {"name": "a", "access": "read", "dtype": "f32"},
                            {"name": "b", "access": "read", "dtype": "f32"}]
    assert prog.scalars == [{"name": "n", "type": "i32"}]
    o, a, b = arrays(64)
    prog(o, a, b, 64)
    np.testing.assert_array_equal(o, a + b)
    with pytest.raises(svod.ValidationError, match=r'buffer 1 \("a"\).*i32'):
        prog(o, np.zeros(64, np.int32), b, 64)  # the inferred dtype is checked


def test_inferred_parameters_core_id_types_and_arrays(cpu):
    src = """
    /* void mark(char* wrong) { */
    #define UNUSED(x) (void)(x)
    __attribute__((noinline)) void mark(int32_t* restrict o, const double x[restrict 4], void* raw,
                                        long long n, unsigned stride, int core_id)
    { UNUSED(raw); UNUSED(x); UNUSED(stride); if (core_id < n) o[core_id] = core_id + 1; }
    """
    prog = cpu.compile(source="#include <stdint.h>\n" + src, entry="mark", global_size=["n"])
    assert prog.buffers == [{"name": "o", "access": "readwrite", "dtype": "i32"},
                            {"name": "x", "access": "read", "dtype": "f64"},
                            {"name": "raw", "access": "readwrite"}]
    assert prog.scalars == [{"name": "n", "type": "i64"}, {"name": "stride", "type": "i32"},
                            {"name": "core_id", "type": "i32"}]
    o = np.zeros(4, np.int32)
    prog(o, np.zeros(4), np.zeros(1, np.uint8), 4, 1)  # core_id is svod's: 4 slices
    np.testing.assert_array_equal(o, [1, 2, 3, 4])
    # A define stands for its value, as -D would.
    prog = cpu.compile(source="void k(REAL* o, int n) { o[0] = n; }", entry="k", defines={"REAL": "double"})
    assert prog.buffers[0]["dtype"] == "f64"
    assert cpu.compile(source="void k(void) {}", entry="k").buffers == []


@pytest.mark.parametrize("source, problem", [
    ("void k(half* o, int n) {}", r'parameter 0 \("o"\): type "half", which svod does not know'),
    ("void k(float* o, float x) {}", r'parameter 1 \("x"\): svod\'s scalars are integers of 32 or 64 bits, not f32'),
    ("void k(int n, float* o) {}", r'pointer parameter 1 \("o"\) follows an integer one'),
    ("void k(float** o) {}", r"a pointer to a pointer"),
    ("void k(int n, ...) {}", r"variadic"),
    ("void k(struct s* o) {}", r"a struct type"),
    ("#define K(name) void name(float* o)\nK(k) {}", r'no definition "k\(...\) \{" found'),
])
def test_parameters_that_cannot_be_read_are_a_clear_error(cpu, source, problem):
    with pytest.raises(svod.ValidationError, match=r"buffers= and scalars= are left out and cannot be read from the "
                                                   r"source: .*" + problem):
        cpu.compile(source=source, entry="k")


def test_declared_parameters_that_disagree_with_the_source_are_refused(cpu):
    # Before: accepted; the kernel ran with its arguments in the wrong registers.
    with pytest.raises(svod.ValidationError, match=r'program "add": buffers= and scalars= declare 3 buffers \(o, a, b\) '
                                                   r"and 0 scalars, but the source's add\(float\* o, const float\* a, "
                                                   r"const float\* b, int n\) takes 4 parameters"):
        cpu.compile(source=ADD_SOURCE, entry="add", buffers=ADD_BUFFERS, scalars=[])
    with pytest.raises(svod.ValidationError, match=r'parameter 2 \("b", const float\*\) is a pointer, but scalar 0'):
        cpu.compile(source=ADD_SOURCE, entry="add", buffers=ADD_BUFFERS[:2],
                    scalars=[{"name": "x", "type": "i32"}, {"name": "n", "type": "i32"}])
    # Only one left out: the other is read from the source.
    prog = cpu.compile(source=ADD_SOURCE, entry="add", buffers=ADD_BUFFERS)
    assert prog.scalars == [{"name": "n", "type": "i32"}]
    # What the reader does not understand is not checked (the compiler has the last word).
    prog = cpu.compile(source="typedef float real;\nvoid k(real* o, MYINT n) { o[0] = n; }", entry="k",
                       defines={"MYINT": "int"}, buffers=[{"name": "o", "access": "write", "dtype": "f32"}],
                       scalars=[{"name": "n", "type": "i32"}])
    assert prog.scalars == [{"name": "n", "type": "i32"}]


def test_other_languages_take_what_is_declared(cpu):
    ir = "define void @k() {\n  ret void\n}\n"
    prog = cpu.compile(source=ir, entry="k", language="llvm")
    assert prog.buffers == [] and prog.scalars == []


def test_numpy_dtypes_wherever_dtype_strings_are(cpu):
    # Before: "compile: the arguments are not JSON values: Object of type type is not JSON serializable".
    prog = cpu.compile(source=ADD_SOURCE, entry="add",
                       buffers=[{"name": "o", "access": "write", "dtype": np.float32},
                                {"name": "a", "dtype": np.dtype("<f4")}, {"name": "b", "dtype": "float32"}],
                       scalars=[{"name": "n", "type": np.int32}])
    assert [b["dtype"] for b in prog.buffers] == ["f32"] * 3 and prog.scalars[0]["type"] == "i32"
    prog = cpu.compile_many([dict(source=ADD_SOURCE, entry="add", name="add_numpy",
                                  buffers=[{"name": n, "dtype": np.float64} for n in "oab"],
                                  scalars=[{"name": "n", "type": np.int64}])])[0]
    assert prog.buffers[0]["dtype"] == "f64" and prog.scalars[0]["type"] == "i64"
    with pytest.raises(svod.ValidationError, match=r"programs.add.buffers\[0\].dtype: dtype complex64: svod has no"):
        cpu.compile(source=ADD_SOURCE, entry="add", buffers=[{"name": "o", "dtype": np.complex64}])
    # numpy's "float" is float64: never taken for C's float.
    with pytest.raises(svod.ValidationError, match=r'buffers\[0\].dtype: unknown element type "float"'):
        cpu.compile(source=ADD_SOURCE, entry="add", buffers=[{"name": "o", "dtype": "float"}])
    with pytest.raises(svod.ValidationError, match=r"scalars\[0\].type"):
        cpu.compile(source=ADD_SOURCE, entry="add", buffers=ADD_BUFFERS, scalars=[{"name": "n", "type": np.float32}])


def test_a_program_binary_loads_without_compiling_in_another_process(cpu, tmp_path):
    binary = cpu.compile_binary(source=ADD_SOURCE, entry="add")
    assert isinstance(binary, bytes)
    (tmp_path / "add.bin").write_bytes(binary)
    # Another process, with an empty object cache and compiling off: the binary's code runs.
    script = f"""
import numpy as np, svod
binary = open({str(tmp_path / "add.bin")!r}, "rb").read()
add = svod.device("CPU").load_binary(memoryview(binary), entry="add")
o, a = np.zeros(3, np.float32), np.arange(3, dtype=np.float32)
add(o, a, a, 3)
print(o.tolist(), [b["name"] for b in add.buffers])
"""
    env = dict(os.environ, SVOD_COMPILE="0", SVOD_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[0.0, 2.0, 4.0] ['o', 'a', 'b']"


def test_a_program_binary_refuses_another_spec_damage_and_other_objects(cpu):
    binary = cpu.compile_binary(source=ADD_SOURCE, entry="add", defines={"UNUSED": 1})
    with pytest.raises(svod.ValidationError, match="compiled from another source, language, entry or defines"):
        cpu.load_binary(binary, entry="add")  # without the define
    assert cpu.load_binary(binary, entry="add", defines={"UNUSED": 1}, name="sum").name == "sum"
    with pytest.raises(svod.LoadError, match="program binary: .*truncated"):
        cpu.load_binary(binary[:-1], entry="add")
    with pytest.raises(svod.ValidationError, match="not an svod package"):
        cpu.load_binary(b"not a binary", entry="add")
    with pytest.raises(svod.ArgumentTypeError, match="load_binary: expected a program binary's bytes, got str"):
        cpu.load_binary(ADD_SOURCE, entry="add")
    with pytest.raises(svod.CompileError):
        cpu.compile_binary(source="void add(float* o) { not C }", entry="add")
