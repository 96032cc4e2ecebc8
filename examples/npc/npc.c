/* A village of NPCs: every NPC forks one shared world prompt
 * (llm_session_fork: its KV blocks are stored once), then all of them answer
 * the player at the same time through the model's batcher while a frame loop
 * polls them without blocking (llm_session_poll), as a game would.
 *
 *   llm_npc [MODEL.gguf]      (default: $LLM_MODEL_PATH)
 *
 * Prints each NPC's answer, the time each llm_session_poll call took (median
 * and max: it must never block, <= 1 ms), the time of each
 * llm_session_decode_async submit (it samples the next token on the calling
 * thread), how many sessions shared each batched decode pass, and the KV
 * memory that sharing the world prompt saved (llm_model_kv_stats).
 * Exit status 1 when a call fails, an NPC says nothing, no KV block is
 * shared, or the median poll takes over 1 ms. (The max is printed, not
 * checked: on a loaded machine the thread can lose the CPU for milliseconds
 * anywhere, which says nothing about the call; the polls the OS did not
 * preempt are timed separately.) */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <llm/llm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define N_NPCS 5
#define MAX_REPLY_TOKENS 40
#define FRAME_NS 4000000L /* a 250 Hz frame loop */
#define MAX_SAMPLES 100000

static const char *kWorld =
    "You are a character in Emberfall, a small mountain village. Emberfall sits in a valley "
    "below the Ashen Peaks, where the old volcano sleeps. Two hundred people live there. "
    "The village has a stone well in the square, a smithy run by the Brannoc family, a bakery "
    "that opens before dawn, a chapel with a cracked bell, and an inn called The Sleeping "
    "Dragon. A river, the Silverrun, flows past the mill on the east side. Last week the "
    "great lantern of the chapel, which has burned for a hundred years, went out and was "
    "stolen. Strange lights have been seen on the slopes of the volcano at night. Wolves have "
    "come down from the forest. Travellers are rare, and the villagers are wary of them but "
    "polite. Winter is coming and the harvest was poor. Answer in character, in one or two "
    "short sentences, and never mention that you are an AI.";

static const struct {
  const char *name;
  const char *persona;
} kNpcs[N_NPCS] = {
    {"Mira", "You are Mira, the baker: cheerful, talkative, and you know every rumour."},
    {"Old Tomas", "You are Old Tomas, the chapel keeper: grave, slow, and suspicious."},
    {"Brannoc", "You are Brannoc, the blacksmith: gruff, strong, and practical."},
    {"Lysa", "You are Lysa, the innkeeper's daughter: curious and a little reckless."},
    {"Captain Dorr", "You are Captain Dorr of the village watch: stern and careful."},
};

static const char *kQuestion =
    "Good morning. I am a traveller. Who stole the chapel lantern, and where should I look for it?";

typedef struct {
  llm_session *session;
  llm_token *suffix;
  size_t n_suffix;
  int phase; /* 0 prefilling, 1 decoding, 2 done */
  int n_generated;
  char text[4096];
  size_t text_len;
} Npc;

static int64_t NowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Context switches of the calling thread so far: voluntary (it waited, e.g.
 * on a lock) and involuntary (the OS preempted it). On a loaded machine the
 * longest polls are the preempted ones; the others show what a poll costs. */
static void ThreadSwitches(long *voluntary, long *involuntary) {
#ifdef RUSAGE_THREAD
  struct rusage ru;
  if (getrusage(RUSAGE_THREAD, &ru) == 0) {
    *voluntary = ru.ru_nvcsw;
    *involuntary = ru.ru_nivcsw;
    return;
  }
#endif
  *voluntary = *involuntary = 0;
}

static int CompareI64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

typedef struct {
  int64_t *v;
  size_t n;
} Samples;

static void Record(Samples *s, int64_t ns) {
  if (s->n < MAX_SAMPLES) s->v[s->n++] = ns;
}

/* Sorts the samples; writes median and max in microseconds. */
static void Summarize(Samples *s, double *median_us, double *max_us) {
  *median_us = *max_us = 0;
  if (s->n == 0) return;
  qsort(s->v, s->n, sizeof(int64_t), CompareI64);
  *median_us = (double)s->v[s->n / 2] / 1000.0;
  *max_us = (double)s->v[s->n - 1] / 1000.0;
}

static int Fail(const char *what) {
  fprintf(stderr, "llm_npc: %s failed: %s\n", what, llm_last_error());
  return 1;
}

/* Tokenizes the chat-formatted prompt of one NPC into a malloc'ed array. */
static llm_status NpcPrompt(const llm_model *model, int i, llm_token **out, size_t *n_out) {
  char system[4096];
  snprintf(system, sizeof system, "%s %s", kWorld, kNpcs[i].persona);
  llm_chat_message messages[2] = {{"system", system}, {"user", kQuestion}};
  static char text[8192];
  size_t len = 0;
  llm_status st = llm_chat_format(model, NULL, messages, 2, 1, text, sizeof text, &len);
  if (st != LLM_OK) return st;
  size_t n = 0;
  st = llm_tokenize(model, text, len, 1, 1, NULL, 0, &n);
  if (st != LLM_OK && st != LLM_ERR_BUFFER_TOO_SMALL) return st;
  *out = malloc(n * sizeof(llm_token));
  if (*out == NULL) return LLM_ERR_OUT_OF_MEMORY;
  *n_out = n;
  return llm_tokenize(model, text, len, 1, 1, *out, n, &n);
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : getenv("LLM_MODEL_PATH");
  if (path == NULL || path[0] == '\0') {
    fprintf(stderr, "usage: llm_npc MODEL.gguf (or set LLM_MODEL_PATH)\n");
    return 2;
  }
  llm_model *model = NULL;
  if (llm_model_load(path, NULL, &model) != LLM_OK) return Fail("llm_model_load");

  /* Every NPC's full prompt; the world part is their common token prefix. */
  llm_token *prompts[N_NPCS];
  size_t n_prompt[N_NPCS];
  for (int i = 0; i < N_NPCS; i++)
    if (NpcPrompt(model, i, &prompts[i], &n_prompt[i]) != LLM_OK) return Fail("prompt");
  size_t n_common = n_prompt[0];
  for (int i = 1; i < N_NPCS; i++) {
    size_t k = 0;
    while (k < n_common && k < n_prompt[i] && prompts[i][k] == prompts[0][k]) k++;
    n_common = k;
  }
  for (int i = 0; i < N_NPCS; i++)
    if (n_common >= n_prompt[i]) {
      fprintf(stderr, "llm_npc: an NPC prompt has no part of its own\n");
      return 1;
    }

  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.sampler.temperature = 0.7f;
  llm_session *world = NULL;
  if (llm_session_create(model, &sp, &world) != LLM_OK) return Fail("llm_session_create");
  int64_t t0 = NowNs();
  if (llm_session_prefill(world, prompts[0], n_common) != LLM_OK) return Fail("world prefill");
  double world_ms = (double)(NowNs() - t0) / 1e6;

  Npc npcs[N_NPCS];
  memset(npcs, 0, sizeof npcs);
  for (int i = 0; i < N_NPCS; i++) {
    if (llm_session_fork(world, &npcs[i].session) != LLM_OK) return Fail("llm_session_fork");
    if (llm_session_set_seed(npcs[i].session, 1000 + (uint64_t)i) != LLM_OK)
      return Fail("llm_session_set_seed");
    npcs[i].suffix = prompts[i] + n_common;
    npcs[i].n_suffix = n_prompt[i] - n_common;
  }
  llm_session_free(world); /* the forks keep the world's blocks */

  printf("Emberfall: %d NPCs forked from one %zu-token world prompt (prefilled once in %.0f ms)\n",
         N_NPCS, n_common, world_ms);
  printf("Player: %s\n\n", kQuestion);

  Samples poll = {malloc(MAX_SAMPLES * sizeof(int64_t)), 0};
  Samples submit = {malloc(MAX_SAMPLES * sizeof(int64_t)), 0};
  Samples frame = {malloc(MAX_SAMPLES * sizeof(int64_t)), 0};
  Samples poll_not_preempted = {malloc(MAX_SAMPLES * sizeof(int64_t)), 0};
  Samples submit_not_preempted = {malloc(MAX_SAMPLES * sizeof(int64_t)), 0};
  long polls_preempted = 0, polls_waited = 0, submits_preempted = 0, submits_waited = 0;
  if (!poll.v || !submit.v || !frame.v || !poll_not_preempted.v || !submit_not_preempted.v)
    return 1;

  for (int i = 0; i < N_NPCS; i++)
    if (llm_session_prefill_async(npcs[i].session, npcs[i].suffix, npcs[i].n_suffix) != LLM_OK)
      return Fail("llm_session_prefill_async");

  long frames = 0;
  int active = N_NPCS;
  t0 = NowNs();
  while (active > 0) {
    int64_t frame_start = NowNs();
    for (int i = 0; i < N_NPCS; i++) {
      Npc *npc = &npcs[i];
      if (npc->phase == 2) continue;
      int32_t done = 0;
      llm_token token = -1;
      long vol0, invol0, vol1, invol1;
      ThreadSwitches(&vol0, &invol0);
      int64_t p0 = NowNs();
      llm_status st = llm_session_poll(npc->session, &done, &token);
      int64_t took = NowNs() - p0;
      ThreadSwitches(&vol1, &invol1);
      Record(&poll, took);
      if (invol1 != invol0) {
        polls_preempted++;
      } else {
        Record(&poll_not_preempted, took);
      }
      polls_waited += vol1 != vol0;
      if (st != LLM_OK) return Fail("llm_session_poll");
      if (!done) continue;
      if (npc->phase == 1) {
        int32_t eog = 0;
        if (llm_token_is_eog(model, token, &eog) != LLM_OK) return Fail("llm_token_is_eog");
        if (!eog) {
          size_t len = 0;
          size_t room = sizeof npc->text - 1 - npc->text_len;
          if (llm_token_to_piece(model, token, 0, npc->text + npc->text_len, room, &len) == LLM_OK)
            npc->text_len += len;
          npc->n_generated++;
        }
        if (eog || npc->n_generated >= MAX_REPLY_TOKENS) {
          npc->phase = 2;
          active--;
          continue;
        }
      }
      npc->phase = 1;
      long svol0, sinvol0, svol1, sinvol1;
      ThreadSwitches(&svol0, &sinvol0);
      int64_t s0 = NowNs();
      if (llm_session_decode_async(npc->session) != LLM_OK) return Fail("llm_session_decode_async");
      int64_t stook = NowNs() - s0;
      ThreadSwitches(&svol1, &sinvol1);
      Record(&submit, stook);
      if (sinvol1 != sinvol0) {
        submits_preempted++;
      } else {
        Record(&submit_not_preempted, stook);
      }
      submits_waited += svol1 != svol0;
    }
    Record(&frame, NowNs() - frame_start);
    frames++;
    /* The rest of the frame: a game would render here. */
    int64_t left = FRAME_NS - (NowNs() - frame_start);
    if (left > 0) {
      struct timespec ts = {0, (long)left};
      nanosleep(&ts, NULL);
    }
  }
  double total_s = (double)(NowNs() - t0) / 1e9;

  /* KV use with every prompt and reply in place, before any NPC is freed. */
  llm_kv_stats kv;
  llm_kv_stats_init(&kv);
  if (llm_model_kv_stats(model, &kv) != LLM_OK) return Fail("llm_model_kv_stats");
  size_t n_tokens[N_NPCS];
  for (int i = 0; i < N_NPCS; i++)
    if (llm_session_n_tokens(npcs[i].session, &n_tokens[i]) != LLM_OK)
      return Fail("llm_session_n_tokens");

  int silent = 0, total_tokens = 0;
  for (int i = 0; i < N_NPCS; i++) {
    npcs[i].text[npcs[i].text_len] = '\0';
    /* Strip leading whitespace and newlines for display. */
    char *t = npcs[i].text;
    while (*t == ' ' || *t == '\n') t++;
    for (char *c = t; *c; c++)
      if (*c == '\n') *c = ' ';
    printf("%-13s %s\n", kNpcs[i].name, t);
    silent += (*t == '\0');
    total_tokens += npcs[i].n_generated;
  }

  double poll_med, poll_max, sub_med, sub_max, frame_med, frame_max;
  Summarize(&poll, &poll_med, &poll_max);
  Summarize(&submit, &sub_med, &sub_max);
  Summarize(&frame, &frame_med, &frame_max);
  double quiet_med, quiet_max, squiet_med, squiet_max;
  Summarize(&poll_not_preempted, &quiet_med, &quiet_max);
  Summarize(&submit_not_preempted, &squiet_med, &squiet_max);
  llm_batch_stats bs;
  llm_batch_stats_init(&bs);
  if (llm_model_batch_stats(model, &bs) != LLM_OK) return Fail("llm_model_batch_stats");

  printf("\n%d tokens in %.2f s over %ld frames of %.0f ms\n", total_tokens, total_s, frames,
         FRAME_NS / 1e6);
  printf("llm_session_poll:         %zu calls, median %.1f us, max %.1f us\n", poll.n, poll_med,
         poll_max);
  printf(
      "  not preempted by the OS: %zu calls, median %.1f us, max %.1f us; %ld preempted, %ld "
      "waited for a lock\n",
      poll_not_preempted.n, quiet_med, quiet_max, polls_preempted, polls_waited);
  printf(
      "llm_session_decode_async: %zu calls, median %.1f us, max %.1f us (samples on this thread)\n",
      submit.n, sub_med, sub_max);
  printf(
      "  not preempted by the OS: %zu calls, median %.1f us, max %.1f us; %ld preempted, %ld "
      "waited for a lock\n",
      submit_not_preempted.n, squiet_med, squiet_max, submits_preempted, submits_waited);
  printf("frame work (all NPCs):    median %.1f us, max %.1f us\n", frame_med, frame_max);
  printf("batcher: %.2f sessions per decode pass on average, at most %llu in one pass\n",
         bs.decode_iterations ? (double)bs.decode_rows / (double)bs.decode_iterations : 0.0,
         (unsigned long long)bs.max_sessions_in_pass);

  /* Without sharing every session would hold its own blocks. */
  uint64_t unshared_blocks = 0, tokens = 0;
  for (int i = 0; i < N_NPCS; i++) {
    unshared_blocks += (n_tokens[i] + kv.block_tokens - 1) / kv.block_tokens;
    tokens += n_tokens[i];
  }
  uint64_t saved = unshared_blocks > kv.blocks_used ? unshared_blocks - kv.blocks_used : 0;
  printf(
      "KV cache (%llu tokens in %d sessions): %llu blocks of %llu KiB in use, %llu of them "
      "shared;\n  without sharing: %llu blocks. Sharing saved %llu blocks = %.1f MiB (%.0f%%)\n",
      (unsigned long long)tokens, N_NPCS, (unsigned long long)kv.blocks_used,
      (unsigned long long)(kv.block_bytes / 1024), (unsigned long long)kv.blocks_shared,
      (unsigned long long)unshared_blocks, (unsigned long long)saved,
      (double)(saved * kv.block_bytes) / (1024.0 * 1024.0),
      100.0 * (double)saved / (double)unshared_blocks);

  int ok = 1;
  if (silent) {
    fprintf(stderr, "llm_npc: %d NPC(s) said nothing\n", silent);
    ok = 0;
  }
  if (kv.blocks_shared == 0) {
    fprintf(stderr, "llm_npc: the world prompt's KV blocks were not shared\n");
    ok = 0;
  }
  if (poll_med > 1000.0) {
    fprintf(stderr, "llm_npc: the median llm_session_poll took %.1f us (> 1 ms)\n", poll_med);
    ok = 0;
  }
  for (int i = 0; i < N_NPCS; i++) {
    llm_session_free(npcs[i].session);
    free(prompts[i]);
  }
  llm_model_free(model);
  free(poll.v);
  free(submit.v);
  free(frame.v);
  free(poll_not_preempted.v);
  free(submit_not_preempted.v);
  return ok ? 0 : 1;
}
