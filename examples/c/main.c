/* A C99 program using an installed svod through its C API: compile a kernel
 * from a JSON spec, run it on the program's own arrays without copying, then
 * load and run a plan file (argv[1], e.g. examples/mlp/plan.json) and print
 * some of its results. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <svod/svod.h>

/* Prints a failed call's status and leaves. */
static void check(svod_status* status, const char* what) {
  if (status == NULL) return;
  fprintf(stderr, "c_consumer: %s failed (%s): %s\n", what, svod_error_kind_name(svod_status_kind(status)),
          svod_status_message(status));
  svod_status_free(status);
  exit(1);
}

static const char* const kScaleSpec =
    "{ \"language\": \"c\", \"entry\": \"scale\","
    "  \"source\": \"void scale(float* restrict y, const float* restrict x, long n, int k) {"
    " for (long i = 0; i < n; i++) y[i] = k * x[i]; }\","
    "  \"buffers\": [ { \"name\": \"y\", \"access\": \"write\" }, { \"name\": \"x\" } ],"
    "  \"scalars\": [ { \"name\": \"n\", \"type\": \"i64\" }, { \"name\": \"k\", \"type\": \"i32\" } ] }";

enum { N = 1000 };

static int run_kernel(svod_device* cpu) {
  static float x[N], y[N];
  svod_program* scale = NULL;
  svod_buffer *bx = NULL, *by = NULL;
  svod_buffer* buffers[2];
  int64_t scalars[2];
  int i;

  for (i = 0; i < N; i++) x[i] = (float)i;
  check(svod_program_compile(cpu, kScaleSpec, &scale), "compiling scale");
  check(svod_buffer_wrap_host(x, "f32", N, &bx), "wrapping x");
  check(svod_buffer_wrap_host(y, "f32", N, &by), "wrapping y");
  buffers[0] = by;
  buffers[1] = bx;
  scalars[0] = N;
  scalars[1] = 3;
  check(svod_program_launch(scale, buffers, 2, scalars, 2), "launching scale");
  for (i = 0; i < N; i++) {
    if (y[i] != 3.0f * x[i]) {
      fprintf(stderr, "c_consumer: y[%d] = %g, expected %g\n", i, y[i], 3.0 * x[i]);
      return 1;
    }
  }
  printf("scale kernel ok: y[%d] = %g\n", N - 1, y[N - 1]);
  check(svod_buffer_release(by), "releasing y");
  check(svod_buffer_release(bx), "releasing x");
  check(svod_program_release(scale), "releasing scale");
  return 0;
}

static int run_plan(const char* path) {
  svod_plan* plan = NULL;
  svod_buffer* probs = NULL;
  void* data = NULL;
  const float* p;
  size_t rows, row, j;

  check(svod_plan_load(path, NULL, &plan), "loading the plan");
  check(svod_plan_execute(plan), "executing the plan");
  check(svod_plan_buffer(plan, "probs", &probs), "finding probs");
  check(svod_buffer_data(probs, &data), "reading probs");
  p = (const float*)data;
  rows = svod_buffer_count(probs) / 10;
  /* Each row is a softmax: ten probabilities summing to one. */
  for (row = 0; row < rows; row++) {
    double sum = 0;
    for (j = 0; j < 10; j++) sum += p[row * 10 + j];
    if (fabs(sum - 1.0) > 1e-4) {
      fprintf(stderr, "c_consumer: probs row %lu sums to %g\n", (unsigned long)row, sum);
      return 1;
    }
  }
  printf("plan %s ok: %lu rows of probs; row 0 =", path, (unsigned long)rows);
  for (j = 0; j < 10; j++) printf(" %.4f", p[j]);
  printf("\n");
  check(svod_buffer_release(probs), "releasing probs");
  check(svod_plan_release(plan), "releasing the plan");
  return 0;
}

int main(int argc, char** argv) {
  svod_device* cpu = NULL;
  int failed;

  if (argc != 2) {
    fprintf(stderr, "usage: %s PLAN.json\n", argv[0]);
    return 2;
  }
  if (svod_api_version() / 1000 != SVOD_API_VERSION_MAJOR || svod_api_version() < SVOD_API_VERSION) {
    fprintf(stderr, "c_consumer: built for svod C API %d, the library is %d\n", SVOD_API_VERSION,
            svod_api_version());
    return 1;
  }
  check(svod_device_get("CPU", &cpu), "opening the CPU");
  printf("svod C API %d on %s\n", svod_api_version(), svod_device_name(cpu));
  failed = run_kernel(cpu) || run_plan(argv[1]);
  check(svod_device_release(cpu), "releasing the CPU");
  return failed;
}
