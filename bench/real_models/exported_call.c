/* bench/real_models: an exported package called from C (libsvod_c alone), timed as a caller
 * makes the call and as svod's replay of the same plan, in alternation.
 *
 *   exported_call PACKAGE SECONDS [--clock wall|cpu] [--var NAME=VALUE ...] NAME=FILE.npy ...
 *
 * Each input NAME is read from a .npy file (little-endian f32, i32, i64 or u8, C order). After one
 * untimed call (the first run of a freshly loaded plan touches its memory for the first time), until
 * SECONDS have passed, it times, one after the other:
 *   call     svod_plan_set_input of every input, svod_plan_execute, svod_plan_get_output of
 *            every output (what a caller does for each call);
 *   execute  svod_plan_execute alone (the plan's replay).
 * and prints one JSON line: {"call_ms": [...], "execute_ms": [...]}. --clock cpu times in the
 * process's CPU time (for one thread on a loaded machine), as real_models.py's --clock does.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <svod/svod.h>

static void check(svod_status* status, const char* what) {
  if (status == NULL) return;
  fprintf(stderr, "exported_call: %s failed (%s): %s\n", what, svod_error_kind_name(svod_status_kind(status)),
          svod_status_message(status));
  exit(1);
}

static void fail(const char* what, const char* where) {
  fprintf(stderr, "exported_call: %s: %s\n", where, what);
  exit(1);
}

enum { kMaxRank = 8, kMaxPorts = 16 };

typedef struct {
  const char* name;
  const char* dtype;
  int64_t shape[kMaxRank];
  size_t rank;
  void* data;
  size_t bytes;
} array;

/* Reads a version 1 .npy file of one of the dtypes above, in C order. */
static array read_npy(const char* name, const char* path) {
  static const struct { const char* descr; const char* dtype; size_t size; } kinds[] = {
      {"'<f4'", "f32", 4}, {"'<i4'", "i32", 4}, {"'<i8'", "i64", 8}, {"'|u1'", "u8", 1}};
  array out;
  unsigned char head[10];
  char header[4096];
  const char* p;
  size_t count = 1, size = 0, k;
  FILE* f = fopen(path, "rb");
  memset(&out, 0, sizeof out);
  out.name = name;
  if (f == NULL) fail("cannot open", path);
  if (fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6) != 0 || head[6] != 1) fail("not an .npy file", path);
  if ((size_t)(head[8] | head[9] << 8) >= sizeof header) fail("bad .npy header", path);
  if (fread(header, 1, head[8] | head[9] << 8, f) != (size_t)(head[8] | head[9] << 8)) fail("bad .npy header", path);
  header[head[8] | head[9] << 8] = '\0';
  for (k = 0; k < sizeof kinds / sizeof kinds[0]; ++k)
    if (strstr(header, kinds[k].descr) != NULL) out.dtype = kinds[k].dtype, size = kinds[k].size;
  if (out.dtype == NULL || strstr(header, "'fortran_order': False") == NULL) fail("expected f32, i32, i64 or u8 in C order", path);
  if ((p = strstr(header, "'shape': (")) == NULL) fail("no shape in the .npy header", path);
  for (p += strlen("'shape': ("); *p != ')';) {
    char* end;
    if (out.rank == kMaxRank) fail("too many dimensions", path);
    out.shape[out.rank] = strtoll(p, &end, 10);
    if (end == p) fail("bad shape in the .npy header", path);
    count *= (size_t)out.shape[out.rank++];
    for (p = end; *p == ',' || *p == ' ';) ++p;
  }
  out.bytes = count * size;
  out.data = malloc(out.bytes ? out.bytes : 1);
  if (out.data == NULL || fread(out.data, 1, out.bytes, f) != out.bytes) fail("the data is cut short", path);
  fclose(f);
  return out;
}

static double now_ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void print_ms(const char* key, const double* ms, size_t n) {
  size_t i;
  printf("\"%s\": [", key);
  for (i = 0; i < n; ++i) printf("%s%.6f", i ? ", " : "", ms[i]);
  printf("]");
}

/* What a caller does for each call: every input set, the plan run, every output read. */
static void call(svod_plan* plan, const array* inputs, size_t n_inputs, const char* const* output_names,
                 void* const* outputs, const size_t* output_bytes, size_t n_outputs) {
  size_t i;
  for (i = 0; i < n_inputs; ++i)
    check(svod_plan_set_input(plan, inputs[i].name, inputs[i].data, inputs[i].bytes, inputs[i].dtype, inputs[i].shape,
                              inputs[i].rank), "setting an input");
  check(svod_plan_execute(plan), "running");
  for (i = 0; i < n_outputs; ++i) check(svod_plan_get_output(plan, output_names[i], outputs[i], output_bytes[i]), "reading an output");
}

int main(int argc, char** argv) {
  svod_plan* plan = NULL;
  array inputs[kMaxPorts];
  void* outputs[kMaxPorts];
  size_t output_bytes[kMaxPorts];
  const char* output_names[kMaxPorts];
  size_t n_inputs = 0, n_outputs, i, d, n = 0, capacity = 1024;
  double seconds, *call_ms, *execute_ms, end;
  clockid_t clock = CLOCK_MONOTONIC;
  int a;
  if (argc < 3) {
    fprintf(stderr, "usage: exported_call PACKAGE SECONDS [--clock wall|cpu] [--var NAME=VALUE ...] NAME=FILE.npy ...\n");
    return 2;
  }
  check(svod_plan_load_package_file(argv[1], NULL, &plan), "loading the package");
  seconds = atof(argv[2]);
  for (a = 3; a < argc; ++a) {
    char* eq;
    if (strcmp(argv[a], "--clock") == 0 && a + 1 < argc) {
      clock = strcmp(argv[++a], "cpu") == 0 ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC;
      continue;
    }
    if (strcmp(argv[a], "--var") == 0 && a + 1 < argc) {
      if ((eq = strchr(argv[++a], '=')) == NULL) fail("expected NAME=VALUE", argv[a]);
      *eq = '\0';
      check(svod_plan_set_var(plan, argv[a], strtoll(eq + 1, NULL, 10)), "setting a variable");
      continue;
    }
    if ((eq = strchr(argv[a], '=')) == NULL || n_inputs == kMaxPorts) fail("expected NAME=FILE.npy", argv[a]);
    *eq = '\0';
    inputs[n_inputs++] = read_npy(argv[a], eq + 1);
  }
  n_outputs = svod_plan_output_count(plan);
  if (n_outputs > kMaxPorts) fail("too many outputs", argv[1]);
  for (i = 0; i < n_outputs; ++i) {
    const char *dtype, *variable;
    size_t rank, count = 1;
    int64_t size;
    svod_buffer* buffer;
    check(svod_plan_output_info(plan, i, &output_names[i], &dtype, &rank), "reading an output");
    for (d = 0; d < rank; ++d) {
      check(svod_plan_output_dim(plan, i, d, &size, &variable), "reading a dimension");
      count *= (size_t)size;
    }
    check(svod_plan_buffer(plan, output_names[i], &buffer), "finding an output's buffer");
    output_bytes[i] = count * (svod_buffer_bytes(buffer) / svod_buffer_count(buffer));  /* elements of its dtype */
    check(svod_buffer_release(buffer), "releasing a buffer handle");
    outputs[i] = malloc(output_bytes[i] + 1);
  }
  call_ms = malloc(capacity * sizeof *call_ms);
  execute_ms = malloc(capacity * sizeof *execute_ms);
  call(plan, inputs, n_inputs, output_names, outputs, output_bytes, n_outputs);
  for (end = now_ms(CLOCK_MONOTONIC) + seconds * 1e3; n == 0 || now_ms(CLOCK_MONOTONIC) < end; ++n) {
    double start;
    if (n == capacity) {
      capacity *= 2;
      call_ms = realloc(call_ms, capacity * sizeof *call_ms);
      execute_ms = realloc(execute_ms, capacity * sizeof *execute_ms);
      if (call_ms == NULL || execute_ms == NULL) fail("out of memory", "times");
    }
    start = now_ms(clock);
    call(plan, inputs, n_inputs, output_names, outputs, output_bytes, n_outputs);
    call_ms[n] = now_ms(clock) - start;
    start = now_ms(clock);
    check(svod_plan_execute(plan), "running");
    execute_ms[n] = now_ms(clock) - start;
  }
  printf("{");
  print_ms("call_ms", call_ms, n);
  printf(", ");
  print_ms("execute_ms", execute_ms, n);
  printf("}\n");
  check(svod_plan_release(plan), "releasing the plan");
  return 0;
}
