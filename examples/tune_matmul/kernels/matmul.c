// c = a x b for n x n row-major f32 matrices, with knobs for `svod tune`:
//   ORDER 0: the textbook i-j-k loop; its inner loop walks b down a column,
//            one cache line per element (the naive start of the search);
//   ORDER 1: i-k-j over TK x TJ blocks of b: the inner loop streams a row of
//            b and c, so it vectorises, and a block of b stays in cache
//            while the rows of a pass over it;
//   SPLIT:   the rows are split into SPLIT parts, one per core_id (the plan
//            launches SPLIT copies: global_size is ["SPLIT"]).
#ifndef ORDER
#define ORDER 0
#endif
#ifndef TJ
#define TJ 64
#endif
#ifndef TK
#define TK 64
#endif
#ifndef SPLIT
#define SPLIT 1
#endif

static inline int min_int(int x, int y) { return x < y ? x : y; }

void matmul(float* restrict c, const float* restrict a, const float* restrict b, int n, int core_id) {
  const int i0 = (int)((long)n * core_id / SPLIT);
  const int i1 = (int)((long)n * (core_id + 1) / SPLIT);
#if ORDER == 0
  for (int i = i0; i < i1; i++) {
    for (int j = 0; j < n; j++) {
      float acc = 0.0f;
      for (int k = 0; k < n; k++) acc += a[i * n + k] * b[k * n + j];
      c[i * n + j] = acc;
    }
  }
#else
  for (int i = i0; i < i1; i++) {
    for (int j = 0; j < n; j++) c[i * n + j] = 0.0f;
  }
  for (int kk = 0; kk < n; kk += TK) {
    const int k1 = min_int(kk + TK, n);
    for (int jj = 0; jj < n; jj += TJ) {
      const int j1 = min_int(jj + TJ, n);
      for (int i = i0; i < i1; i++) {
        float* restrict ci = c + i * n;
        for (int k = kk; k < k1; k++) {
          const float aik = a[i * n + k];
          const float* restrict bk = b + k * n;
          for (int j = jj; j < j1; j++) ci[j] += aik * bk[j];
        }
      }
    }
  }
#endif
}
