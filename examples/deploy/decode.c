/* Greedy decoding of tinygrad's LLM from C, with the C API alone (libsvod_c).
 *
 * The package is the model's decode step exported from Python with svod.tinygrad.export
 * (tests/python/test_tinygrad_export.py exports tinygrad's Transformer.rollout_jit so): one
 * token in, input "token" (i32 [1, 1]), at the position given by the plan variable
 * "start_pos"; input "temperature" (f32 [1]); output "next" (i32 [1, 1]), the next token,
 * which the step itself picks (the argmax of the logits at temperature 0). Its KV caches are
 * state in the package, kept from one run to the next.
 *
 *   decode STEP.svodpkg FIRST_TOKEN COUNT
 *
 * feeds FIRST_TOKEN at position 0, then each token it gets back at the next position, and
 * prints the COUNT tokens it got, one a line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <svod/svod.h>

/* Prints a failed call's status and leaves. */
static void check(svod_status* status, const char* what) {
  if (status == NULL) return;
  fprintf(stderr, "decode: %s failed (%s): %s\n", what, svod_error_kind_name(svod_status_kind(status)),
          svod_status_message(status));
  svod_status_free(status);
  exit(1);
}

int main(int argc, char** argv) {
  svod_plan* step = NULL;
  const int64_t token_shape[2] = {1, 1}, temperature_shape[1] = {1};
  const float temperature = 0.0f;
  int32_t token;
  long count, position;
  if (argc != 4) {
    fprintf(stderr, "usage: decode STEP.svodpkg FIRST_TOKEN COUNT\n");
    return 2;
  }
  token = (int32_t)atol(argv[2]);
  count = atol(argv[3]);
  check(svod_plan_load_package_file(argv[1], NULL, &step), "loading the step");
  check(svod_plan_set_input(step, "temperature", &temperature, sizeof temperature, "f32", temperature_shape, 1),
        "setting the temperature");
  for (position = 0; position < count; ++position) {
    check(svod_plan_set_input(step, "token", &token, sizeof token, "i32", token_shape, 2), "setting the token");
    check(svod_plan_set_var(step, "start_pos", position), "setting the position");
    check(svod_plan_execute(step), "running the step");
    check(svod_plan_get_output(step, "next", &token, sizeof token), "reading the next token");
    printf("%d\n", (int)token);
  }
  check(svod_plan_release(step), "releasing the step");
  return 0;
}
