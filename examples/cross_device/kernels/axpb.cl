// out = 2 * x + b, one work-item per element.
__kernel void axpb(__global float* out, __global const float* x, __global const float* b, int n) {
  const int i = get_global_id(0);
  if (i < n) out[i] = 2.0f * x[i] + b[i];
}
