/*
 * Writes the logits libllm computes for a fixed set of token sequences to a
 * file, so that two builds can be compared bit for bit with cmp (a refactor
 * that must not change a single logit: run this against the library before
 * and after, with the same model).
 *
 *   cc -O2 tools/dump_logits.c -Iinclude -Lbuild -lllm -o dump_logits
 *   LD_LIBRARY_PATH=build ./dump_logits model.gguf out.bin
 *
 * Scenarios (each appends raw float32 logits, n_vocab per position):
 *   1. one session per prompt (lengths 1, 7, 33, 100, 257: one and several
 *      prefill chunks), then 8 greedy decode steps; F16 and F32 KV caches;
 *   2. deterministic mode: 4 forked sessions decoding together through the
 *      asynchronous calls, so their steps share batched passes.
 * Token ids are pseudo-random (a fixed LCG), so no tokenizer is involved.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "llm/llm.h"

static uint32_t lcg_state = 12345u;
static int32_t next_token(int32_t n_vocab) {
  lcg_state = lcg_state * 1664525u + 1013904223u;
  return (int32_t)((lcg_state >> 8) % (uint32_t)n_vocab);
}

static int check(llm_status s, const char *what) {
  if (s != LLM_OK) {
    fprintf(stderr, "dump_logits: %s: %s (%s)\n", what, llm_status_string(s), llm_last_error());
    exit(1);
  }
  return 0;
}

static void dump(FILE *out, const llm_session *session) {
  const float *logits = NULL;
  size_t n = 0;
  check(llm_session_logits(session, &logits, &n), "logits");
  if (fwrite(logits, sizeof(float), n, out) != n) {
    fprintf(stderr, "dump_logits: write failed\n");
    exit(1);
  }
}

static llm_model *load(const char *path, int32_t deterministic) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.n_threads = 2;
  mp.deterministic = deterministic;
  llm_model *model = NULL;
  check(llm_model_load(path, &mp, &model), "load");
  return model;
}

static llm_session *session_for(llm_model *model, int32_t kv_type) {
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.n_ctx = 512;
  sp.kv_type = kv_type;
  sp.sampler.temperature = 0.0f; /* greedy */
  llm_session *s = NULL;
  check(llm_session_create(model, &sp, &s), "session");
  return s;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.gguf OUT.bin\n", argv[0]);
    return 2;
  }
  FILE *out = fopen(argv[2], "wb");
  if (out == NULL) return 1;
  static const size_t lengths[] = {1, 7, 33, 100, 257};
  llm_token prompt[257];

  llm_model *model = load(argv[1], 0);
  llm_model_info info;
  llm_model_info_init(&info);
  check(llm_model_get_info(model, &info), "info");
  for (int32_t kv = LLM_KV_F16; kv <= LLM_KV_F32; ++kv) {
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; ++i) {
      for (size_t t = 0; t < lengths[i]; ++t) prompt[t] = next_token(info.n_vocab);
      llm_session *s = session_for(model, kv);
      check(llm_session_prefill(s, prompt, lengths[i]), "prefill");
      dump(out, s);
      for (int step = 0; step < 8; ++step) {
        llm_token tok;
        check(llm_session_decode(s, &tok), "decode");
        dump(out, s);
      }
      llm_session_free(s);
    }
  }
  llm_model_free(model);

  model = load(argv[1], 1);
  llm_session *parent = session_for(model, LLM_KV_F16);
  for (size_t t = 0; t < 40; ++t) prompt[t] = next_token(info.n_vocab);
  check(llm_session_prefill(parent, prompt, 40), "prefill");
  llm_session *kids[4];
  for (int k = 0; k < 4; ++k) {
    check(llm_session_fork(parent, &kids[k]), "fork");
    llm_token own = next_token(info.n_vocab);
    check(llm_session_prefill(kids[k], &own, 1), "prefill");
  }
  for (int step = 0; step < 8; ++step) {
    for (int k = 0; k < 4; ++k) check(llm_session_decode_async(kids[k]), "decode_async");
    for (int k = 0; k < 4; ++k) {
      llm_token tok;
      check(llm_session_wait(kids[k], &tok), "wait");
      dump(out, kids[k]);
    }
  }
  for (int k = 0; k < 4; ++k) llm_session_free(kids[k]);
  llm_session_free(parent);
  llm_model_free(model);
  return fclose(out) == 0 ? 0 : 1;
}
