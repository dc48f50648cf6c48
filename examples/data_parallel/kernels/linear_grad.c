// Weight and bias gradients of y = x @ w + b from this rank's rows:
//   gw = x[rows]^T @ dy[rows]  ([K, N]),   gb = column sums of dy[rows]  ([N]).
// x is [batch, K] and dy is [batch, N]. Both gradients are overwritten, not
// accumulated, so a rank's buffers hold its own partial sums until the
// all_reduce adds the other ranks'.
void linear_grad(float* restrict gw, float* restrict gb, const float* restrict x, const float* restrict dy, int row0,
                 int rows) {
  // One row of gw at a time, summed in a local array the compiler keeps in
  // registers: N is small, and a loop over the rows of the shard inside
  // reads dy with unit stride.
  for (int k = 0; k < K; k++) {
    float acc[N];
    for (int j = 0; j < N; j++) acc[j] = 0.0f;
    for (int i = row0; i < row0 + rows; i++) {
      const float xik = x[i * K + k];
      const float* restrict dyi = dy + i * N;
      for (int j = 0; j < N; j++) acc[j] += xik * dyi[j];
    }
    for (int j = 0; j < N; j++) gw[k * N + j] = acc[j];
  }
  for (int j = 0; j < N; j++) gb[j] = 0.0f;
  for (int i = row0; i < row0 + rows; i++)
    for (int j = 0; j < N; j++) gb[j] += dy[i * N + j];
}
