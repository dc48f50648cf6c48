// partial[g] = sum of work-group g's LOCAL elements of x (zero past n), by a
// tree reduction in local memory.
__kernel void block_sum(__global float* partial, __global const float* x, int n) {
  __local float tile[LOCAL];
  const int l = get_local_id(0);
  const int i = get_global_id(0);
  tile[l] = i < n ? x[i] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int stride = LOCAL / 2; stride > 0; stride >>= 1) {
    if (l < stride) tile[l] += tile[l + stride];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) partial[get_group_id(0)] = tile[0];
}
