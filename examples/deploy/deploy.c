/* Runs an exported model with the C API alone (libsvod_c): loads a package,
 * lists its inputs and outputs, fills each input from a .npy file (f32,
 * little-endian, C order) given as NAME=FILE.npy, runs, and prints each
 * output's shape, first values and sum.
 *
 *   deploy mlp.svodpkg x=examples/mlp/x.npy
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <svod/svod.h>

/* Prints a failed call's status and leaves. */
static void check(svod_status* status, const char* what) {
  if (status == NULL) return;
  fprintf(stderr, "deploy: %s failed (%s): %s\n", what, svod_error_kind_name(svod_status_kind(status)),
          svod_status_message(status));
  svod_status_free(status);
  exit(1);
}

static void fail(const char* what, const char* path) {
  fprintf(stderr, "deploy: %s: %s\n", path, what);
  exit(1);
}

enum { kMaxRank = 8 };

/* An .npy file of f32 values: its shape and data. */
typedef struct {
  int64_t shape[kMaxRank];
  size_t rank;
  float* data;
  size_t bytes;
} npy_f32;

/* Reads a version 1 .npy file of little-endian f32 values in C order. */
static npy_f32 read_npy_f32(const char* path) {
  npy_f32 out;
  unsigned char head[10];
  char header[4096];
  unsigned header_len;
  const char* p;
  size_t count = 1;
  FILE* f = fopen(path, "rb");
  memset(&out, 0, sizeof out);
  if (f == NULL) fail("cannot open", path);
  if (fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6) != 0 || head[6] != 1) fail("not an .npy file (version 1)", path);
  header_len = head[8] | (unsigned)head[9] << 8;
  if (header_len >= sizeof header || fread(header, 1, header_len, f) != header_len) fail("bad .npy header", path);
  header[header_len] = '\0';
  if (strstr(header, "'descr': '<f4'") == NULL || strstr(header, "'fortran_order': False") == NULL)
    fail("expected little-endian f32 in C order", path);
  p = strstr(header, "'shape': (");
  if (p == NULL) fail("no shape in the .npy header", path);
  p += strlen("'shape': (");
  while (*p != ')') {
    char* end;
    if (out.rank == kMaxRank) fail("too many dimensions", path);
    out.shape[out.rank] = strtoll(p, &end, 10);
    if (end == p) fail("bad shape in the .npy header", path);
    count *= (size_t)out.shape[out.rank++];
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  out.bytes = count * sizeof(float);
  out.data = malloc(out.bytes ? out.bytes : 1);
  if (out.data == NULL || fread(out.data, 1, out.bytes, f) != out.bytes) fail("the data is cut short", path);
  fclose(f);
  return out;
}

/* "[64, 256]" or "[batch, 3]" for input or output `index`. */
static void print_port(svod_plan* plan, size_t index, int input) {
  const char *name, *dtype, *variable;
  size_t rank, d;
  int64_t size;
  check(input ? svod_plan_input_info(plan, index, &name, &dtype, &rank)
              : svod_plan_output_info(plan, index, &name, &dtype, &rank),
        "reading a port");
  printf("  %s %s %s [", input ? "input " : "output", name, dtype);
  for (d = 0; d < rank; ++d) {
    check(input ? svod_plan_input_dim(plan, index, d, &size, &variable)
                : svod_plan_output_dim(plan, index, d, &size, &variable),
          "reading a dimension");
    if (variable != NULL) printf("%s%s=%lld", d ? ", " : "", variable, (long long)size);
    else printf("%s%lld", d ? ", " : "", (long long)size);
  }
  printf("]\n");
}

int main(int argc, char** argv) {
  svod_plan* plan = NULL;
  size_t i, inputs, outputs;
  int a;
  if (argc < 2) {
    fprintf(stderr, "usage: deploy MODEL.svodpkg [NAME=FILE.npy ...]\n");
    return 2;
  }
  check(svod_plan_load_package_file(argv[1], NULL, &plan), "loading the package");
  inputs = svod_plan_input_count(plan);
  outputs = svod_plan_output_count(plan);
  printf("%s: %zu input(s), %zu output(s)\n", argv[1], inputs, outputs);
  for (i = 0; i < inputs; ++i) print_port(plan, i, 1);
  for (i = 0; i < outputs; ++i) print_port(plan, i, 0);

  for (a = 2; a < argc; ++a) {
    char* eq = strchr(argv[a], '=');
    npy_f32 array;
    if (eq == NULL) fail("expected NAME=FILE.npy", argv[a]);
    *eq = '\0';
    array = read_npy_f32(eq + 1);
    check(svod_plan_set_input(plan, argv[a], array.data, array.bytes, "f32", array.shape, array.rank), "setting an input");
    free(array.data);
  }
  check(svod_plan_execute(plan), "running");

  for (i = 0; i < outputs; ++i) {
    const char *name, *dtype, *variable;
    size_t rank, d, count = 1, k;
    int64_t size;
    float* values;
    double sum = 0;
    check(svod_plan_output_info(plan, i, &name, &dtype, &rank), "reading an output");
    if (strcmp(dtype, "f32") != 0) {
      printf("%s: %s (not printed)\n", name, dtype);
      continue;
    }
    for (d = 0; d < rank; ++d) {
      check(svod_plan_output_dim(plan, i, d, &size, &variable), "reading a dimension");
      count *= (size_t)size;
    }
    values = malloc(count * sizeof(float) + 1);
    if (values == NULL) fail("out of memory", name);
    check(svod_plan_get_output(plan, name, values, count * sizeof(float)), "reading an output");
    for (k = 0; k < count; ++k) sum += values[k];
    printf("%s: %zu values [%g, %g, %g, ...] sum %.4f\n", name, count, values[0], count > 1 ? values[1] : 0.0,
           count > 2 ? values[2] : 0.0, sum);
    free(values);
  }
  check(svod_plan_release(plan), "releasing the plan");
  return 0;
}
