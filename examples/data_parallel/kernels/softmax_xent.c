// Softmax cross-entropy on this rank's rows, as a mean over the GLOBAL batch
// (BATCH rows, all ranks together): each rank's share is divided by BATCH, so
// summing the ranks' shares (the all_reduce) gives the full-batch loss and
// gradient, whatever the number of ranks.
//   loss[0]    = sum over my rows of -log softmax(logits[i])[labels[i]] / BATCH
//   dlogits[i] = (softmax(logits[i]) - onehot(labels[i])) / BATCH
// logits and dlogits are [BATCH, N]; labels holds BATCH class indices.
#include <math.h>

void softmax_xent(float* restrict dlogits, float* restrict loss, const float* restrict logits,
                  const int* restrict labels, int row0, int rows) {
  const float scale = 1.0f / BATCH;
  float total = 0.0f;
  for (int i = row0; i < row0 + rows; i++) {
    const float* restrict row = logits + i * N;
    float* restrict d = dlogits + i * N;
    // Subtracting the row maximum keeps expf from overflowing.
    float top = row[0];
    for (int j = 1; j < N; j++) top = row[j] > top ? row[j] : top;
    float sum = 0.0f;
    for (int j = 0; j < N; j++) {
      d[j] = expf(row[j] - top);
      sum += d[j];
    }
    const int label = labels[i];
    total += logf(sum) - (row[label] - top);
    const float inv = scale / sum;
    for (int j = 0; j < N; j++) d[j] *= inv;
    d[label] -= scale;
  }
  loss[0] = total * scale;
}
