/* The 1M-element add of bench_add.cpp, compiled into the benchmark binary by
   clang-19 with svod's object flags, as the native baseline. */
void native_add(float* restrict o, const float* restrict a, const float* restrict b, int n) {
  for (int i = 0; i < n; i++) o[i] = a[i] + b[i];
}
