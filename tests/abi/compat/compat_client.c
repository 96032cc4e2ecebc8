/* A libllm client compiled against one published header and run against
 * today's library: the binary compatibility docs/ABI.md promises, checked
 * the way an old binary would meet it.
 *
 * tests/CMakeLists.txt builds this file once per header: LLM_COMPAT_HEADER
 * names tests/abi/compat/llm-0.1.h, llm-0.2.h or include/llm/llm.h. Every
 * struct the client hands to the library sits in one allocation between
 * guard bytes, and its own bytes start as a pattern (an uninitialised stack
 * struct); after every call the guards must be intact. Under ASan the guards
 * are also poisoned, so a stray write stops at the faulty store.
 *
 * Usage: llm_abi_compat_<v> <tiny model .gguf>. Exit status 0 = pass; every
 * failed check prints one line to stderr. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include LLM_COMPAT_HEADER

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define GUARD_SIZE 64
#define GUARD_BYTE 0x5A
#define FILL_BYTE 0xA5

static int failures = 0;

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "compat %d.%d: FAILED: %s\n", LLM_VERSION_MAJOR, LLM_VERSION_MINOR, what);
    ++failures;
  }
}

static void check_ok(llm_status s, const char *what) {
  if (s != LLM_OK) {
    fprintf(stderr, "compat %d.%d: FAILED: %s returned %s (%s)\n", LLM_VERSION_MAJOR,
            LLM_VERSION_MINOR, what, llm_status_string(s), llm_last_error());
    ++failures;
  }
}

/* ---- guarded structs ------------------------------------------------------ */

/* One allocation: GUARD_SIZE guard bytes, size bytes of FILL_BYTE for the
 * struct, GUARD_SIZE guard bytes. At most 16 live at once. */
typedef struct guarded {
  const char *name;
  unsigned char *base;
  size_t size;
} guarded;

static guarded g_all[16];
static size_t g_count = 0;

static void *guarded_new(const char *name, size_t size) {
  unsigned char *base = (unsigned char *)malloc(2 * GUARD_SIZE + size);
  if (base == NULL || g_count == sizeof g_all / sizeof g_all[0]) {
    fprintf(stderr, "compat: out of memory\n");
    exit(2);
  }
  memset(base, GUARD_BYTE, GUARD_SIZE);
  memset(base + GUARD_SIZE, FILL_BYTE, size);
  memset(base + GUARD_SIZE + size, GUARD_BYTE, GUARD_SIZE);
  POISON(base, GUARD_SIZE);
  POISON(base + GUARD_SIZE + size, GUARD_SIZE);
  g_all[g_count].name = name;
  g_all[g_count].base = base;
  g_all[g_count].size = size;
  ++g_count;
  return base + GUARD_SIZE;
}

#define GUARDED(type, var) type *var = (type *)guarded_new(#type " " #var, sizeof(type))

/* Every live struct's guards are intact after the call named `after`. */
static void guards_intact(const char *after) {
  size_t i, j;
  for (i = 0; i < g_count; ++i) {
    unsigned char *b = g_all[i].base;
    const size_t size = g_all[i].size;
    UNPOISON(b, GUARD_SIZE);
    UNPOISON(b + GUARD_SIZE + size, GUARD_SIZE);
    for (j = 0; j < GUARD_SIZE; ++j) {
      if (b[j] != GUARD_BYTE || b[GUARD_SIZE + size + j] != GUARD_BYTE) {
        fprintf(stderr,
                "compat %d.%d: FAILED: after %s, the guard %s %s (%zu bytes) was overwritten\n",
                LLM_VERSION_MAJOR, LLM_VERSION_MINOR, after,
                b[j] != GUARD_BYTE ? "before" : "after", g_all[i].name, size);
        ++failures;
        break;
      }
    }
    POISON(b, GUARD_SIZE);
    POISON(b + GUARD_SIZE + size, GUARD_SIZE);
  }
}

static void guarded_free_all(void) {
  size_t i;
  for (i = 0; i < g_count; ++i) {
    UNPOISON(g_all[i].base, 2 * GUARD_SIZE + g_all[i].size);
    free(g_all[i].base);
  }
  g_count = 0;
}

/* Bytes [from, to) of p still hold FILL_BYTE (the library did not write them). */
static int untouched(const void *p, size_t from, size_t to) {
  const unsigned char *b = (const unsigned char *)p;
  size_t i;
  for (i = from; i < to; ++i)
    if (b[i] != FILL_BYTE) return 0;
  return 1;
}

/* ---- what an *_init must write -------------------------------------------- */

/* The size an *_init call in this client writes: the size of the struct in
 * the header it was compiled against. The one exception is a 0.2 client's
 * llm_model_params_init: that symbol was published in 0.1 and writes the 0.1
 * size (32 bytes on LP64) forever, because it cannot tell a 0.1 caller from
 * a 0.2 one. */
#if LLM_VERSION_MINOR == 2
#define MODEL_PARAMS_INIT_SIZE offsetof(llm_model_params, kv_budget_bytes)
#else
#define MODEL_PARAMS_INIT_SIZE sizeof(llm_model_params)
#endif

#define CHECK_INIT(var, init_size, what)                                               \
  do {                                                                                 \
    check((var)->struct_size == (init_size), what ": struct_size");                    \
    check(untouched((var), (init_size), sizeof *(var)), what ": wrote past its size"); \
    guards_intact(what);                                                               \
  } while (0)

/* ---- generation ----------------------------------------------------------- */

typedef struct text_buf {
  char text[256];
  size_t len;
} text_buf;

static int32_t collect(const char *text, size_t len, void *user) {
  text_buf *t = (text_buf *)user;
  if (t->len + len < sizeof t->text) {
    memcpy(t->text + t->len, text, len);
    t->len += len;
  }
  return 0;
}

/* Prompt "hello", greedy, at most 4 tokens; the text lands in *out. */
static void generate(llm_model *model, llm_session *session, text_buf *out) {
  llm_token prompt[32];
  size_t n = 0;
  GUARDED(llm_generate_params, gp);
  GUARDED(llm_generate_result, gr);
  check_ok(llm_tokenize(model, "hello", 5, 1, 0, prompt, 32, &n), "llm_tokenize");
  check(n > 0 && n <= 32, "llm_tokenize: token count");
  check_ok(llm_generate_params_init(gp), "llm_generate_params_init");
  CHECK_INIT(gp, sizeof *gp, "llm_generate_params_init");
  check(gp->max_tokens == 256 && gp->stop == NULL && gp->on_piece == NULL,
        "llm_generate_params_init: defaults");
  check_ok(llm_generate_result_init(gr), "llm_generate_result_init");
  CHECK_INIT(gr, sizeof *gr, "llm_generate_result_init");
  check(gr->n_generated == 0 && gr->stop_reason == 0, "llm_generate_result_init: zeroed");
  gp->max_tokens = 4;
  gp->on_piece = collect;
  gp->user = out;
  memset(out, 0, sizeof *out);
  check_ok(llm_generate(session, prompt, n, gp, gr), "llm_generate");
  guards_intact("llm_generate");
  check(gr->struct_size == sizeof *gr, "llm_generate: result struct_size kept");
  check(gr->n_prompt_tokens == (int32_t)n, "llm_generate: n_prompt_tokens");
  check(gr->n_generated >= 1 && gr->n_generated <= 4, "llm_generate: n_generated in [1, 4]");
  check(gr->stop_reason == LLM_STOP_EOG || gr->stop_reason == LLM_STOP_MAX_TOKENS,
        "llm_generate: stop_reason");
}

int main(int argc, char **argv) {
  llm_model *model = NULL;
  llm_session *session = NULL;
  text_buf first, second;
  if (argc != 2) {
    fprintf(stderr, "usage: %s <tiny model .gguf>\n", argv[0]);
    return 2;
  }

  {
    /* Model params: init, then load with them. */
    GUARDED(llm_model_params, mp);
    GUARDED(llm_model_info, info);
    check_ok(llm_model_params_init(mp), "llm_model_params_init");
    CHECK_INIT(mp, MODEL_PARAMS_INIT_SIZE, "llm_model_params_init");
    check(mp->vocab_only == 0 && mp->n_threads == 0 && mp->progress == NULL,
          "llm_model_params_init: defaults");
    mp->n_threads = 1;
#if LLM_VERSION_MINOR >= 2
    /* What a 0.2 client writes after init; with the 0.1-sized struct_size
     * the 0.2 symbol gives it, the library does not read these. */
    mp->kv_budget_bytes = 0;
    mp->deterministic = 1;
    mp->batch_tokens = 64;
#endif
    check_ok(llm_model_load(argv[1], mp, &model), "llm_model_load");
    guards_intact("llm_model_load");
    if (model == NULL) return 1;

    check_ok(llm_model_info_init(info), "llm_model_info_init");
    CHECK_INIT(info, sizeof *info, "llm_model_info_init");
    check(info->n_vocab == 0 && info->name[0] == '\0', "llm_model_info_init: zeroed");
    check_ok(llm_model_get_info(model, info), "llm_model_get_info");
    guards_intact("llm_model_get_info");
    check(info->struct_size == sizeof *info, "llm_model_get_info: struct_size kept");
    check(info->n_vocab > 0 && info->n_layer > 0, "llm_model_get_info: sizes");
    check(strcmp(info->architecture, "llama") == 0, "llm_model_get_info: architecture");
    guarded_free_all();
  }

#if LLM_VERSION_MINOR >= 2
  {
    GUARDED(llm_kv_stats, ks);
    GUARDED(llm_batch_stats, bs);
    check_ok(llm_kv_stats_init(ks), "llm_kv_stats_init");
    CHECK_INIT(ks, sizeof *ks, "llm_kv_stats_init");
    check_ok(llm_model_kv_stats(model, ks), "llm_model_kv_stats");
    guards_intact("llm_model_kv_stats");
    check(ks->struct_size == sizeof *ks && ks->block_tokens > 0, "llm_model_kv_stats: values");
    check_ok(llm_batch_stats_init(bs), "llm_batch_stats_init");
    CHECK_INIT(bs, sizeof *bs, "llm_batch_stats_init");
    check_ok(llm_model_batch_stats(model, bs), "llm_model_batch_stats");
    guards_intact("llm_model_batch_stats");
    check(bs->struct_size == sizeof *bs && bs->iterations == 0, "llm_model_batch_stats: values");
    guarded_free_all();
  }
#endif

  {
    /* A greedy session with params, a sampler update, two generations. */
    GUARDED(llm_session_params, sp);
    GUARDED(llm_sampler_params, sampler);
#if LLM_VERSION_MINOR >= 3
    GUARDED(llm_sampler_ext, ext);
#endif
    check_ok(llm_session_params_init(sp), "llm_session_params_init");
    CHECK_INIT(sp, sizeof *sp, "llm_session_params_init");
    check(sp->kv_type == LLM_KV_F16 && sp->n_ctx == 0 && sp->seed == 0,
          "llm_session_params_init: defaults");
    check(sp->sampler.struct_size == sizeof sp->sampler && sp->sampler.top_k == 40,
          "llm_session_params_init: sampler defaults");
    sp->n_ctx = 64;
    sp->sampler.temperature = 0.0f;
#if LLM_VERSION_MINOR >= 3
    check(sp->sampler_ext == NULL, "llm_session_params_init: sampler_ext NULL");
    check_ok(llm_sampler_ext_init(ext), "llm_sampler_ext_init");
    CHECK_INIT(ext, sizeof *ext, "llm_sampler_ext_init");
    sp->sampler_ext = ext;
#endif
    check_ok(llm_session_create(model, sp, &session), "llm_session_create");
    guards_intact("llm_session_create");
    if (session == NULL) return 1;

    check_ok(llm_sampler_params_init(sampler), "llm_sampler_params_init");
    CHECK_INIT(sampler, sizeof *sampler, "llm_sampler_params_init");
    check(sampler->top_k == 40 && sampler->penalty_last_n == 64,
          "llm_sampler_params_init: defaults");
    sampler->temperature = 0.0f;
    check_ok(llm_session_set_sampler(session, sampler), "llm_session_set_sampler");
    guards_intact("llm_session_set_sampler");
    guarded_free_all();

    generate(model, session, &first);
    guarded_free_all();
    check_ok(llm_session_reset(session), "llm_session_reset");
    generate(model, session, &second);
    guarded_free_all();
    check(
        first.len > 0 && first.len == second.len && memcmp(first.text, second.text, first.len) == 0,
        "greedy generation: the same text twice");
  }

#if LLM_VERSION_MINOR >= 2
  {
    GUARDED(llm_session_stats, ss);
    check_ok(llm_session_stats_init(ss), "llm_session_stats_init");
    CHECK_INIT(ss, sizeof *ss, "llm_session_stats_init");
    check_ok(llm_session_get_stats(session, ss), "llm_session_get_stats");
    guards_intact("llm_session_get_stats");
    check(ss->struct_size == sizeof *ss && ss->iterations > 0, "llm_session_get_stats: values");
    guarded_free_all();
  }
#endif

  {
    /* Chat formatting of a message array between guards. */
    char text[512];
    size_t len = 0;
    llm_chat_message *msgs =
        (llm_chat_message *)guarded_new("llm_chat_message[2]", 2 * sizeof(llm_chat_message));
    msgs[0].role = "system";
    msgs[0].content = "be brief";
    msgs[1].role = "user";
    msgs[1].content = "hi";
    check_ok(llm_chat_format(NULL, "chatml", msgs, 2, 1, text, sizeof text, &len),
             "llm_chat_format");
    guards_intact("llm_chat_format");
    check(
        len == strlen(text) && strcmp(text,
                                      "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhi"
                                      "<|im_end|>\n<|im_start|>assistant\n") == 0,
        "llm_chat_format: chatml text");
    guarded_free_all();
  }

  llm_session_free(session);
  llm_model_free(model);
  if (failures == 0) {
    printf("compat %d.%d client against libllm %s: OK\n", LLM_VERSION_MAJOR, LLM_VERSION_MINOR,
           llm_version());
  }
  return failures == 0 ? 0 : 1;
}
