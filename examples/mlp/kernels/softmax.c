// Row-wise softmax of an [M, N] float matrix, rows split over CORES slices.
// Subtracting the row maximum keeps expf from overflowing.
#include <math.h>

void softmax(float* restrict p, const float* restrict logits, int core_id) {
  const int rows = (M + CORES - 1) / CORES;
  const int first = core_id * rows;
  const int last = first + rows < M ? first + rows : M;
  for (int i = first; i < last; i++) {
    const float* restrict row = logits + i * N;
    float* restrict out = p + i * N;
    float top = row[0];
    for (int j = 1; j < N; j++) top = row[j] > top ? row[j] : top;
    float sum = 0.0f;
    for (int j = 0; j < N; j++) {
      out[j] = expf(row[j] - top);
      sum += out[j];
    }
    const float scale = 1.0f / sum;
    for (int j = 0; j < N; j++) out[j] *= scale;
  }
}
