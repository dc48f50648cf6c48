"""A few C kernels called on numpy arrays: the arrays are passed in place, never copied."""
import numpy as np

import svod

cpu = svod.device("CPU")

saxpy = cpu.compile(
    source="""
    void saxpy(float* restrict y, const float* restrict x, int a, int n) {
      for (int i = 0; i < n; i++) y[i] += a * x[i];
    }""",
    entry="saxpy",
    buffers=[{"name": "y", "access": "readwrite", "dtype": "f32"}, {"name": "x", "dtype": "f32"}],
    scalars=[{"name": "a", "type": "i32"}, {"name": "n", "type": "i32"}])

# Rows summed in parallel: global_size slices, each gets its core_id.
row_sum = cpu.compile(
    source="""
    void row_sum(double* restrict out, const double* restrict m, int rows, int cols, int core_id) {
      for (int r = core_id * ROWS_PER_SLICE; r < (core_id + 1) * ROWS_PER_SLICE && r < rows; r++) {
        double s = 0;
        for (int c = 0; c < cols; c++) s += m[(long)r * cols + c];
        out[r] = s;
      }
    }""",
    entry="row_sum", defines={"ROWS_PER_SLICE": 16},
    buffers=[{"name": "out", "access": "write", "dtype": "f64"}, {"name": "m", "dtype": "f64"}],
    scalars=[{"name": "rows", "type": "i32"}, {"name": "cols", "type": "i32"}, {"name": "core_id", "type": "i32"}],
    global_size=["(rows + 15) / 16"])

x = np.arange(1000, dtype=np.float32)
y = np.ones(1000, dtype=np.float32)
saxpy(y, x, 3, n=x.size)
assert np.array_equal(y, 1 + 3 * x)

m = np.random.default_rng(0).standard_normal((100, 37))
sums = np.empty(100)
row_sum(sums, m, *m.shape)
assert np.allclose(sums, m.sum(axis=1))

try:
    saxpy(y, x.astype(np.float64), 3, n=x.size)
except svod.ValidationError as e:
    print("refused as expected:", e)
print("saxpy and row_sum match numpy")
