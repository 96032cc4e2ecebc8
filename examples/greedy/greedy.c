/* Cross-language agreement program (tests/bindings/same_tokens.sh):
 *   llm_greedy "<prompt>"
 * loads $LLM_MODEL_PATH, tokenizes the prompt (add_special = 1,
 * parse_special = 0), decodes 16 tokens greedily (temperature 0) and prints
 * their ids space-separated on one line. Every binding has the same program. */
#include <llm/llm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_GENERATE 16

static int fail(const char *what) {
  fprintf(stderr, "llm_greedy: %s: %s\n", what, llm_last_error());
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: llm_greedy PROMPT (model: $LLM_MODEL_PATH)\n");
    return 2;
  }
  const char *path = getenv("LLM_MODEL_PATH");
  if (path == NULL || path[0] == '\0') {
    fprintf(stderr, "llm_greedy: set LLM_MODEL_PATH\n");
    return 2;
  }
  llm_model *model = NULL;
  if (llm_model_load(path, NULL, &model) != LLM_OK) return fail("load");

  size_t n = 0;
  const char *prompt = argv[1];
  /* A size query first (capacity 0), then the real call. */
  llm_status st = llm_tokenize(model, prompt, strlen(prompt), 1, 0, NULL, 0, &n);
  if (st != LLM_OK && st != LLM_ERR_BUFFER_TOO_SMALL) return fail("tokenize");
  llm_token *tokens = malloc((n ? n : 1) * sizeof(llm_token));
  if (tokens == NULL) return 1;
  if (llm_tokenize(model, prompt, strlen(prompt), 1, 0, tokens, n, &n) != LLM_OK)
    return fail("tokenize");

  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.sampler.temperature = 0.0f;
  llm_session *session = NULL;
  if (llm_session_create(model, &sp, &session) != LLM_OK) return fail("session");
  if (llm_session_prefill(session, tokens, n) != LLM_OK) return fail("prefill");
  for (int i = 0; i < N_GENERATE; i++) {
    llm_token t;
    if (llm_session_decode(session, &t) != LLM_OK) return fail("decode");
    printf(i ? " %d" : "%d", (int)t);
  }
  printf("\n");
  free(tokens);
  llm_session_free(session);
  llm_model_free(model);
  return 0;
}
