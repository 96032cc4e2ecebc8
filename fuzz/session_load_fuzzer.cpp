// llm_session_load on arbitrary bytes (saved-session buffers are untrusted
// input: SECURITY.md, docs/SESSION_FORMAT.md). Goes through the C API, so the
// handle registry, the session's busy lease, DeserializeSession and the KV
// pool's block allocation are all on the path.
//
// Input layout: byte 0 is a mode byte, the rest is the buffer.
//   bit 0: before loading, re-compute the CRC-32 trailer (zlib crc32 over all
//          bytes but the last 4, little-endian) so that mutations get past the
//          checksum and reach the field checks behind it (model fingerprint,
//          layout, counts, token ids, sampler, RNG, KV blocks);
//   bit 1: load into a session with an F32 KV cache instead of F16.
// The model (tests/data/tiny/tiny-llama-Q8_0.gguf, $LLM_FUZZ_DATA_DIR
// overrides tests/data) is loaded once; each input gets a fresh session
// (n_ctx 48) so that no state leaks between inputs.
//
// Invariants checked:
//  - a refused buffer gives a non-empty message and leaves the session as it
//    was (still empty, no logits, still usable: a prefill works);
//  - a loaded session has n_tokens <= n_ctx and logits iff the buffer had them;
//    it decodes one token (a valid id) unless it is at its context limit;
//  - llm_session_save of the loaded state gives a buffer of the size it
//    reports that is byte-identical to the (CRC-fixed) input, and it loads
//    again into another session.
//
// Seeds: LLM_SESSION_SEEDS_DIR=DIR session_load_fuzzer writes real saved
// buffers (empty, after prefill, after decode, F16 and F32 caches, each with
// mode byte 0 and 1) into DIR and exits; fuzz/corpus/session_load_fuzzer was
// started from them (docs/FUZZING.md).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "llm/llm.h"

namespace {

constexpr int32_t kNCtx = 48;

llm_model* g_model = nullptr;
size_t g_n_vocab = 0;

std::string DataDir() {
  const char* v = std::getenv("LLM_FUZZ_DATA_DIR");
  return (v != nullptr && v[0] != '\0') ? std::string(v) : std::string(LLM_FUZZ_DATA_DIR);
}

llm_session* NewSession(bool f32) {
  llm_session_params sp;
  llm_session_params_init(&sp);
  sp.n_ctx = kNCtx;
  sp.kv_type = f32 ? LLM_KV_F32 : LLM_KV_F16;
  sp.sampler.temperature = 0.7f;
  llm_session* s = nullptr;
  if (llm_session_create(g_model, &sp, &s) != LLM_OK) {
    std::fprintf(stderr, "session_load_fuzzer: session create failed: %s\n", llm_last_error());
    std::abort();
  }
  return s;
}

std::vector<uint8_t> Save(llm_session* s) {
  size_t size = 0;
  LLM_FUZZ_CHECK(llm_session_save(s, nullptr, 0, &size) == LLM_ERR_BUFFER_TOO_SMALL);
  LLM_FUZZ_CHECK(size >= 140);
  std::vector<uint8_t> buf(size);
  size_t written = 0;
  LLM_FUZZ_CHECK(llm_session_save(s, buf.data(), buf.size(), &written) == LLM_OK);
  LLM_FUZZ_CHECK(written == size);
  return buf;
}

void FixCrc(std::vector<uint8_t>& buf) {
  if (buf.size() < 4) return;
  const uLong crc = crc32_z(0L, buf.data(), buf.size() - 4);
  for (int i = 0; i < 4; ++i) buf[buf.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
}

void WriteSeed(const std::string& dir, const std::string& name, uint8_t mode,
               const std::vector<uint8_t>& buf) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::fprintf(stderr, "session_load_fuzzer: cannot write %s\n", path.c_str());
    std::exit(1);
  }
  std::fwrite(&mode, 1, 1, f);
  std::fwrite(buf.data(), 1, buf.size(), f);
  std::fclose(f);
}

// Real saved buffers from small histories (a few KB each).
void WriteSeeds(const std::string& dir) {
  const llm_token prompt[5] = {1, 15, 27, 300, 42};
  for (int f32 = 0; f32 < 2; ++f32) {
    const std::string kv = f32 ? "f32" : "f16";
    llm_session* s = NewSession(f32 != 0);
    std::vector<std::pair<std::string, std::vector<uint8_t>>> seeds;
    seeds.emplace_back("empty-" + kv, Save(s));
    LLM_FUZZ_CHECK(llm_session_prefill(s, prompt, 3) == LLM_OK);
    seeds.emplace_back("prefill3-" + kv, Save(s));
    llm_token t = 0;
    LLM_FUZZ_CHECK(llm_session_decode(s, &t) == LLM_OK);
    LLM_FUZZ_CHECK(llm_session_decode(s, &t) == LLM_OK);
    seeds.emplace_back("decode2-" + kv, Save(s));
    // Cancelled-style state: tokens without logits (a rewind to 0 then a
    // prefill would give logits again; rewind to 0 gives an empty session).
    LLM_FUZZ_CHECK(llm_session_rewind(s, 2) == LLM_OK);
    seeds.emplace_back("rewind2-" + kv, Save(s));
    for (const auto& [name, buf] : seeds) {
      WriteSeed(dir, name + "-crc", 0, buf);
      WriteSeed(dir, name + "-fixcrc", 1 | (f32 ? 2 : 0), buf);
      if (f32 == 0) WriteSeed(dir, name + "-crc-intof32", 2, buf);  // wrong KV type
    }
    llm_session_free(s);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  llm_model_params mp;
  llm_model_params_init(&mp);
  mp.n_threads = 1;
  const std::string path = DataDir() + "/tiny/tiny-llama-Q8_0.gguf";
  if (llm_model_load(path.c_str(), &mp, &g_model) != LLM_OK) {
    std::fprintf(stderr, "session_load_fuzzer: cannot load %s: %s\n", path.c_str(),
                 llm_last_error());
    std::abort();
  }
  llm_model_info info;
  info.struct_size = sizeof info;
  if (llm_model_get_info(g_model, &info) != LLM_OK) std::abort();
  g_n_vocab = static_cast<size_t>(info.n_vocab);
  if (const char* dir = std::getenv("LLM_SESSION_SEEDS_DIR"); dir != nullptr && dir[0] != '\0') {
    WriteSeeds(dir);
    std::fprintf(stderr, "session_load_fuzzer: seeds written to %s\n", dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const bool fix_crc = (mode & 1) != 0;
  const bool f32 = (mode & 2) != 0;
  std::vector<uint8_t> buf(data + 1, data + size);
  if (fix_crc) FixCrc(buf);

  llm_session* s = NewSession(f32);
  const llm_status st = llm_session_load(s, buf.data(), buf.size());
  size_t n = 12345;
  LLM_FUZZ_CHECK(llm_session_n_tokens(s, &n) == LLM_OK);
  const float* logits = nullptr;
  size_t n_vocab = 0;
  const bool has_logits = llm_session_logits(s, &logits, &n_vocab) == LLM_OK;
  if (st != LLM_OK) {
    LLM_FUZZ_CHECK(st == LLM_ERR_INVALID_ARGUMENT || st == LLM_ERR_UNSUPPORTED ||
                   st == LLM_ERR_CONTEXT_FULL || st == LLM_ERR_KV_FULL);
    LLM_FUZZ_CHECK(llm_last_error()[0] != '\0');
    // Unchanged: still the fresh, empty session.
    LLM_FUZZ_CHECK(n == 0);
    LLM_FUZZ_CHECK(!has_logits);
    llm_session_free(s);
    return 0;
  }
  LLM_FUZZ_CHECK(n <= static_cast<size_t>(kNCtx));
  const bool buf_has_logits = buf.size() >= 48 && (buf[44] & 1) != 0;
  LLM_FUZZ_CHECK(has_logits == buf_has_logits);
  if (has_logits) LLM_FUZZ_CHECK(n_vocab == g_n_vocab && n > 0);

  // Save reproduces the (CRC-fixed) input exactly and loads again.
  std::vector<uint8_t> again = Save(s);
  LLM_FUZZ_CHECK(again == buf);
  llm_session* s2 = NewSession(f32);
  LLM_FUZZ_CHECK(llm_session_load(s2, again.data(), again.size()) == LLM_OK);
  size_t n2 = 0;
  LLM_FUZZ_CHECK(llm_session_n_tokens(s2, &n2) == LLM_OK && n2 == n);
  llm_session_free(s2);

  // Usable: decode one token, or prefill one if there are no logits.
  if (n < static_cast<size_t>(kNCtx)) {
    if (has_logits) {
      llm_token t = -1;
      LLM_FUZZ_CHECK(llm_session_decode(s, &t) == LLM_OK);
      LLM_FUZZ_CHECK(t >= 0 && static_cast<size_t>(t) < g_n_vocab);
    } else {
      const llm_token one = 1;
      LLM_FUZZ_CHECK(llm_session_prefill(s, &one, 1) == LLM_OK);
    }
    size_t n3 = 0;
    LLM_FUZZ_CHECK(llm_session_n_tokens(s, &n3) == LLM_OK && n3 == n + 1);
  } else {
    llm_token t = -1;
    if (has_logits) LLM_FUZZ_CHECK(llm_session_decode(s, &t) == LLM_ERR_CONTEXT_FULL);
  }
  llm_session_free(s);
  return 0;
}
