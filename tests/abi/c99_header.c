/* The public header is C99: this file is compiled with
 * -std=c99 -pedantic -Werror -Wall -Wextra -Wstrict-prototypes (see the ABI
 * section of tests/CMakeLists.txt), linked against libllm.so and run as a
 * CTest. It also checks, at compile time, the layout promises a C host or an
 * FFI binding relies on: fixed-width fields, struct_size first, 4-byte
 * status and token types.
 *
 * Exit status 0 = pass; every failed check prints one line to stderr. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "llm/llm.h"

/* C99 has no _Static_assert: a negative array size fails the build. */
#define C99_STATIC_ASSERT(cond, name) typedef char c99_static_assert_##name[(cond) ? 1 : -1]

C99_STATIC_ASSERT(sizeof(llm_status) == 4, status_is_4_bytes);
C99_STATIC_ASSERT(sizeof(llm_token) == 4, token_is_4_bytes);
C99_STATIC_ASSERT(offsetof(llm_model_params, struct_size) == 0, model_params_size_first);
C99_STATIC_ASSERT(offsetof(llm_model_info, struct_size) == 0, model_info_size_first);
C99_STATIC_ASSERT(offsetof(llm_sampler_params, struct_size) == 0, sampler_size_first);
C99_STATIC_ASSERT(offsetof(llm_session_params, struct_size) == 0, session_size_first);
C99_STATIC_ASSERT(offsetof(llm_generate_params, struct_size) == 0, generate_size_first);
C99_STATIC_ASSERT(offsetof(llm_generate_result, struct_size) == 0, result_size_first);
C99_STATIC_ASSERT(sizeof(((llm_model_info *)0)->architecture) == 32, architecture_is_32);
C99_STATIC_ASSERT(sizeof(((llm_model_info *)0)->name) == 128, name_is_128);
C99_STATIC_ASSERT(LLM_OK == 0 && LLM_ERR_INTERNAL == 12, status_values_fixed);

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "c99_header: FAILED: %s\n", what);
    ++failures;
  }
}

/* A log sink and a progress callback with exactly the typedef'd signatures. */
static void log_sink(int32_t level, const char *message, void *user) {
  (void)level;
  (void)message;
  (void)user;
}

static int32_t on_progress(float progress, void *user) {
  (void)progress;
  (void)user;
  return 0;
}

static int32_t on_piece(const char *text, size_t len, void *user) {
  (void)text;
  (void)len;
  (void)user;
  return 0;
}

int main(void) {
  llm_model_params mp;
  llm_session_params sp;
  llm_generate_params gp;
  llm_model_info info;
  llm_model *model = NULL;
  llm_log_fn log_fn = log_sink;
  llm_progress_fn progress_fn = on_progress;
  llm_piece_fn piece_fn = on_piece;
  char version[32];

  check(llm_version() != NULL, "llm_version() is not NULL");
  sprintf(version, "%d.%d.%d", LLM_VERSION_MAJOR, LLM_VERSION_MINOR, LLM_VERSION_PATCH);
  check(llm_version() != NULL && strcmp(llm_version(), version) == 0,
        "llm_version() matches LLM_VERSION_*");
  check(strcmp(llm_status_string(LLM_ERR_IO), "LLM_ERR_IO") == 0, "llm_status_string(IO)");
  check(llm_status_string(-12345) != NULL, "llm_status_string(unknown) is not NULL");

  check(llm_set_log_callback(log_fn, NULL, LLM_LOG_WARN) == LLM_OK, "install a log sink");
  check(llm_set_log_callback(NULL, NULL, LLM_LOG_ERROR) == LLM_OK, "remove the log sink");

  check(llm_model_params_init(&mp) == LLM_OK, "llm_model_params_init");
  check(mp.struct_size == sizeof mp, "llm_model_params.struct_size");
  mp.progress = progress_fn;
  mp.progress_user = NULL;
  check(llm_session_params_init(&sp) == LLM_OK, "llm_session_params_init");
  check(sp.struct_size == sizeof sp, "llm_session_params.struct_size");
  check(llm_generate_params_init(&gp) == LLM_OK, "llm_generate_params_init");
  gp.on_piece = piece_fn;
  check(llm_model_info_init(&info) == LLM_OK, "llm_model_info_init");
  check(llm_model_params_init(NULL) == LLM_ERR_INVALID_ARGUMENT, "llm_model_params_init(NULL)");
  check(llm_last_error() != NULL && llm_last_error()[0] != '\0', "llm_last_error() after failure");

  check(llm_model_load("/nonexistent/c99-header.gguf", &mp, &model) == LLM_ERR_IO,
        "llm_model_load(missing file) is LLM_ERR_IO");
  check(model == NULL, "out_model untouched on failure");
  llm_model_free(NULL);
  llm_session_free(NULL);

  if (failures == 0) printf("c99_header: libllm %s OK\n", llm_version());
  return failures == 0 ? 0 : 1;
}
