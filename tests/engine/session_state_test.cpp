// Session save buffers (engine/session_state.h, docs/SESSION_FORMAT.md):
// a round trip restores every field and every KV byte, and every kind of bad
// buffer is refused with its status and a message, before the fresh KV table
// or the state is touched. Also the model fingerprint (engine/model_fingerprint.h).
#include "engine/session_state.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/model_fingerprint.h"
#include "format/gguf.h"
#include "gtest/gtest.h"
#include "tests/kv/kv_test_util.h"
#include "kv/block_pool.h"
#include "kv/block_table.h"

namespace llm {
namespace {

constexpr int64_t kVocab = 1000;
constexpr int64_t kCtx = 64;
constexpr int64_t kPositions = 37;
constexpr uint64_t kFingerprint = 0x1234abcd5678ef01ull;

// Header offsets of the fields the tests patch (docs/SESSION_FORMAT.md).
constexpr size_t kOffVersion = 8;
constexpr size_t kOffTotalSize = 16;
constexpr size_t kOffFlags = 44;
constexpr size_t kOffNTokens = 48;
constexpr size_t kOffRng = 72;
constexpr size_t kOffSampler = 104;
constexpr size_t kHeaderBytes = 136;

KvLayout TestLayout() {
  KvLayout l;
  l.n_layer = 3;
  l.n_head_kv = 2;
  l.head_dim = 8;
  return l;
}

void Put32(std::vector<uint8_t>* b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[off + i] = static_cast<uint8_t>(v >> (8 * i));
}
void Put64(std::vector<uint8_t>* b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[off + i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Re-seals a patched buffer (CRC-32 of everything before the 4-byte trailer)
// so that the checks behind the checksum are reached.
void FixChecksum(std::vector<uint8_t>* b) {
  const size_t n = b->size() - 4;
  Put32(b, n, static_cast<uint32_t>(crc32_z(crc32_z(0L, Z_NULL, 0), b->data(), n)));
}

// A session of kPositions positions with random rows, logits, sampler and RNG.
struct Saved {
  KvType type;
  std::unique_ptr<KvBlockPool> pool;
  std::unique_ptr<KvBlockTable> table;
  SessionState state;
  std::vector<uint8_t> buffer;
};

Saved MakeSaved(KvType type, uint32_t seed, bool has_logits = true) {
  std::mt19937_64 rng(seed);
  Saved s;
  s.type = type;
  const KvLayout layout = TestLayout();
  s.pool = std::make_unique<HostKvPool>(layout, layout.block_bytes() * 64);
  s.table = std::make_unique<KvBlockTable>(s.pool.get(), type, kCtx);
  std::uniform_int_distribution<int> tok(0, kVocab - 1);
  for (int64_t i = 0; i < kPositions; ++i) s.state.tokens.push_back(tok(rng));
  EXPECT_TRUE(s.table->PrepareWrite(0, kPositions).ok());
  for (int64_t l = 0; l < layout.n_layer; ++l) {
    for (int64_t p = 0; p < kPositions; ++p) {
      uint8_t* k = KvRow(*s.table, l, false, p);
      uint8_t* v = KvRow(*s.table, l, true, p);
      for (size_t i = 0; i < s.table->row_bytes(); ++i) {
        k[i] = static_cast<uint8_t>(rng());
        v[i] = static_cast<uint8_t>(rng());
      }
    }
  }
  s.table->Commit(s.state.tokens);

  std::uniform_real_distribution<float> u(-3, 3);
  s.state.model_fingerprint = kFingerprint;
  s.state.kv_type = type;
  s.state.seed = rng();
  s.state.sampler.temperature = u(rng);
  s.state.sampler.top_k = static_cast<int32_t>(rng() % 100) - 10;
  s.state.sampler.top_p = std::abs(u(rng));
  s.state.sampler.min_p = std::abs(u(rng)) / 3;
  s.state.sampler.repeat_penalty = 0.5f + std::abs(u(rng));
  s.state.sampler.presence_penalty = u(rng);
  s.state.sampler.frequency_penalty = u(rng);
  s.state.sampler.penalty_last_n = static_cast<int32_t>(rng() % 200) - 1;
  for (auto& w : s.state.rng_state) w = rng();
  s.state.has_logits = has_logits;
  if (has_logits) {
    for (int64_t i = 0; i < kVocab; ++i) s.state.logits.push_back(u(rng) * 10);
  }
  EXPECT_TRUE(ValidateSamplerConfig(s.state.sampler).ok());

  s.buffer.assign(SerializedSessionSize(s.state, layout), 0xAA);
  EXPECT_TRUE(SerializeSession(s.state, *s.table, layout, s.buffer.data()).ok());
  return s;
}

SessionLoadExpect Expect(KvType type, const KvLayout* layout) {
  SessionLoadExpect e;
  e.model_fingerprint = kFingerprint;
  e.kv_type = type;
  e.n_vocab = kVocab;
  e.n_ctx = kCtx;
  e.layout = layout;
  return e;
}

// A state that failed loads must leave as it was.
SessionState Sentinel() {
  SessionState s;
  s.tokens = {7, 8};
  s.seed = 99;
  s.rng_state = {1, 2, 3, 4};
  return s;
}

void ExpectSentinel(const SessionState& s) {
  EXPECT_EQ(s.tokens, (std::vector<int32_t>{7, 8}));
  EXPECT_EQ(s.seed, 99u);
  EXPECT_FALSE(s.has_logits);
}

// Loads buf into a fresh table of the saved session's pool and expects a
// refusal with code and a message containing what; nothing may be written.
void ExpectRefused(const Saved& s, const std::vector<uint8_t>& buf, llm_status code,
                   const std::string& what, SessionLoadExpect e) {
  KvBlockTable fresh(s.pool.get(), e.kv_type, e.n_ctx);
  SessionState st = Sentinel();
  absl::Status status = DeserializeSession(buf.data(), buf.size(), e, &st, &fresh);
  ASSERT_FALSE(status.ok()) << what;
  EXPECT_EQ(ToLlmStatus(status), code) << status;
  EXPECT_NE(std::string(status.message()).find(what), std::string::npos)
      << "message: " << status.message() << "\nwanted: " << what;
  EXPECT_EQ(fresh.n_positions(), 0);
  EXPECT_TRUE(fresh.blocks().empty());
  ExpectSentinel(st);
}

class SessionStateTest : public ::testing::TestWithParam<KvType> {};

TEST_P(SessionStateTest, RoundTripIsBitExact) {
  const KvLayout layout = TestLayout();
  for (bool has_logits : {true, false}) {
    Saved s = MakeSaved(GetParam(), 11 + has_logits, has_logits);
    const size_t want = 136 + 4 * kPositions + (has_logits ? 4 * kVocab : 0) +
                        2 * 3 * kPositions * 16 * KvLayout::elem_bytes(GetParam()) + 4;
    ASSERT_EQ(s.buffer.size(), want);

    // Loaded into another pool, as another session would be.
    HostKvPool pool2(layout, layout.block_bytes() * 64);
    KvBlockTable fresh(&pool2, GetParam(), kCtx);
    SessionState got;
    absl::Status st = DeserializeSession(s.buffer.data(), s.buffer.size(),
                                         Expect(GetParam(), &layout), &got, &fresh);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(got.model_fingerprint, kFingerprint);
    EXPECT_EQ(got.kv_type, GetParam());
    EXPECT_EQ(got.tokens, s.state.tokens);
    EXPECT_EQ(got.seed, s.state.seed);
    EXPECT_EQ(got.rng_state, s.state.rng_state);
    EXPECT_EQ(got.has_logits, has_logits);
    ASSERT_EQ(got.logits.size(), s.state.logits.size());
    for (size_t i = 0; i < got.logits.size(); ++i) {
      ASSERT_EQ(FloatBits(got.logits[i]), FloatBits(s.state.logits[i])) << i;
    }
    const SamplerConfig& a = got.sampler;
    const SamplerConfig& b = s.state.sampler;
    EXPECT_EQ(FloatBits(a.temperature), FloatBits(b.temperature));
    EXPECT_EQ(a.top_k, b.top_k);
    EXPECT_EQ(FloatBits(a.top_p), FloatBits(b.top_p));
    EXPECT_EQ(FloatBits(a.min_p), FloatBits(b.min_p));
    EXPECT_EQ(FloatBits(a.repeat_penalty), FloatBits(b.repeat_penalty));
    EXPECT_EQ(FloatBits(a.presence_penalty), FloatBits(b.presence_penalty));
    EXPECT_EQ(FloatBits(a.frequency_penalty), FloatBits(b.frequency_penalty));
    EXPECT_EQ(a.penalty_last_n, b.penalty_last_n);

    ASSERT_EQ(fresh.n_positions(), kPositions);
    ASSERT_EQ(fresh.row_bytes(), s.table->row_bytes());
    for (int64_t l = 0; l < layout.n_layer; ++l) {
      for (int64_t p = 0; p < kPositions; ++p) {
        ASSERT_EQ(std::memcmp(KvRow(fresh, l, false, p), KvRow(*s.table, l, false, p),
                              fresh.row_bytes()),
                  0)
            << "K layer " << l << " pos " << p;
        ASSERT_EQ(std::memcmp(KvRow(fresh, l, true, p), KvRow(*s.table, l, true, p),
                              fresh.row_bytes()),
                  0)
            << "V layer " << l << " pos " << p;
      }
    }

    // Saving the loaded session gives the same bytes.
    std::vector<uint8_t> again(SerializedSessionSize(got, layout));
    ASSERT_TRUE(SerializeSession(got, fresh, layout, again.data()).ok());
    EXPECT_EQ(again, s.buffer);
  }
}

// A session rotating with LongRoPE's long factors (Phi-3, n_ctx above the
// original context) saves flag bit 1; only a session that rotates the same
// way loads it, and the flag round-trips.
TEST_P(SessionStateTest, LongRopeFlagRoundTripsAndMustMatch) {
  const KvLayout layout = TestLayout();
  Saved s = MakeSaved(GetParam(), 21);
  s.state.rope_long = true;
  s.buffer.assign(SerializedSessionSize(s.state, layout), 0xAA);
  ASSERT_TRUE(SerializeSession(s.state, *s.table, layout, s.buffer.data()).ok());
  uint32_t flags = 0;
  for (int i = 0; i < 4; ++i) flags |= static_cast<uint32_t>(s.buffer[kOffFlags + i]) << (8 * i);
  EXPECT_EQ(flags, 3u);  // has_logits | rope_long

  SessionLoadExpect e = Expect(GetParam(), &layout);
  ExpectRefused(s, s.buffer, LLM_ERR_INVALID_ARGUMENT, "long LongRoPE factors", e);
  e.rope_long = true;
  HostKvPool pool2(layout, layout.block_bytes() * 64);
  KvBlockTable fresh(&pool2, GetParam(), kCtx, 0, 1);
  SessionState got;
  absl::Status st = DeserializeSession(s.buffer.data(), s.buffer.size(), e, &got, &fresh);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(got.rope_long);
  EXPECT_EQ(fresh.n_positions(), kPositions);
  std::vector<uint8_t> again(SerializedSessionSize(got, layout));
  ASSERT_TRUE(SerializeSession(got, fresh, layout, again.data()).ok());
  EXPECT_EQ(again, s.buffer);

  // A short session's buffer is refused by a long session.
  Saved short_s = MakeSaved(GetParam(), 22);
  KvBlockTable fresh2(&pool2, GetParam(), kCtx, 0, 1);
  SessionState sentinel = Sentinel();
  st = DeserializeSession(short_s.buffer.data(), short_s.buffer.size(), e, &sentinel, &fresh2);
  EXPECT_EQ(ToLlmStatus(st), LLM_ERR_INVALID_ARGUMENT) << st;
  EXPECT_NE(std::string(st.message()).find("short LongRoPE factors"), std::string::npos) << st;
  ExpectSentinel(sentinel);
}

TEST_P(SessionStateTest, EmptySessionRoundTrips) {
  const KvLayout layout = TestLayout();
  HostKvPool pool(layout, layout.block_bytes() * 4);
  KvBlockTable table(&pool, GetParam(), kCtx);
  SessionState state;
  state.model_fingerprint = kFingerprint;
  state.kv_type = GetParam();
  state.seed = 5;
  state.rng_state = {0, 0, 0, 9};
  std::vector<uint8_t> buf(SerializedSessionSize(state, layout));
  ASSERT_EQ(buf.size(), 140u);
  ASSERT_TRUE(SerializeSession(state, table, layout, buf.data()).ok());
  KvBlockTable fresh(&pool, GetParam(), kCtx);
  SessionState got = Sentinel();
  absl::Status st =
      DeserializeSession(buf.data(), buf.size(), Expect(GetParam(), &layout), &got, &fresh);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_FALSE(got.has_logits);
  EXPECT_TRUE(got.logits.empty());
  EXPECT_EQ(got.seed, 5u);
  EXPECT_EQ(got.rng_state, state.rng_state);
  EXPECT_EQ(fresh.n_positions(), 0);
}

TEST_P(SessionStateTest, EverySingleByteFlipIsRefused) {
  const KvLayout layout = TestLayout();
  Saved s = MakeSaved(GetParam(), 21);
  const SessionLoadExpect e = Expect(GetParam(), &layout);
  std::mt19937 rng(31);
  std::vector<size_t> offsets;
  for (size_t i = 0; i < kHeaderBytes; ++i) offsets.push_back(i);  // the whole header
  for (size_t i = kHeaderBytes; i + 4 < s.buffer.size(); i += 1 + rng() % 97) {
    offsets.push_back(i);  // tokens, logits, KV rows
  }
  for (size_t i = s.buffer.size() - 4; i < s.buffer.size(); ++i) offsets.push_back(i);  // CRC
  ASSERT_GT(offsets.size(), 250u);
  for (size_t off : offsets) {
    std::vector<uint8_t> buf = s.buffer;
    const uint8_t x = static_cast<uint8_t>(1 + rng() % 255);
    buf[off] ^= x;
    SCOPED_TRACE(testing::Message() << "offset " << off << " xor " << int(x));
    if (off < 8) {
      ExpectRefused(s, buf, LLM_ERR_INVALID_ARGUMENT, "bad magic", e);
    } else if (off < 12) {
      const uint32_t v = 1u ^ (static_cast<uint32_t>(x) << (8 * (off - 8)));
      if (v == 0) {
        ExpectRefused(s, buf, LLM_ERR_INVALID_ARGUMENT, "format version 0", e);
      } else {
        ExpectRefused(s, buf, LLM_ERR_UNSUPPORTED, "newer libllm", e);
      }
    } else if (off >= kOffTotalSize && off < kOffTotalSize + 8) {
      ExpectRefused(s, buf, LLM_ERR_INVALID_ARGUMENT, "session buffer is corrupt", e);
    } else {
      ExpectRefused(s, buf, LLM_ERR_INVALID_ARGUMENT,
                    "session buffer is corrupt: checksum mismatch", e);
    }
  }
}

TEST_P(SessionStateTest, TruncatedAndTrailingAreRefused) {
  const KvLayout layout = TestLayout();
  Saved s = MakeSaved(GetParam(), 41);
  const SessionLoadExpect e = Expect(GetParam(), &layout);
  std::mt19937 rng(43);
  const size_t size = s.buffer.size();
  std::vector<size_t> lengths = {0, 1, 8, 12, 135, 136, 139, 140, 141};
  lengths.insert(lengths.end(), {size / 2, size - 4, size - 1});
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % s.buffer.size());
  for (size_t n : lengths) {
    SCOPED_TRACE(testing::Message() << "length " << n);
    std::vector<uint8_t> buf(s.buffer.begin(), s.buffer.begin() + n);
    ExpectRefused(s, buf, LLM_ERR_INVALID_ARGUMENT, "session buffer is corrupt", e);
    if (n >= 140) ExpectRefused(s, buf, LLM_ERR_INVALID_ARGUMENT, "truncated", e);
  }
  std::vector<uint8_t> longer = s.buffer;
  longer.push_back(0);
  ExpectRefused(s, longer, LLM_ERR_INVALID_ARGUMENT, "1 trailing bytes", e);
  // Even with the size field and checksum made to agree, the counts must add up.
  Put64(&longer, kOffTotalSize, longer.size());
  FixChecksum(&longer);
  ExpectRefused(s, longer, LLM_ERR_INVALID_ARGUMENT, "do not add up", e);
}

TEST_P(SessionStateTest, HeaderMismatchesAreRefused) {
  const KvLayout layout = TestLayout();
  Saved s = MakeSaved(GetParam(), 51);
  const SessionLoadExpect e = Expect(GetParam(), &layout);

  std::vector<uint8_t> magic = s.buffer;
  std::memcpy(magic.data(), "GGUF\3\0\0\0", 8);
  ExpectRefused(s, magic, LLM_ERR_INVALID_ARGUMENT, "bad magic", e);

  std::vector<uint8_t> newer = s.buffer;
  Put32(&newer, kOffVersion, 2);
  ExpectRefused(s, newer, LLM_ERR_UNSUPPORTED,
                "saved by a newer libllm (format 2; this build reads 1)", e);

  SessionLoadExpect other_model = e;
  other_model.model_fingerprint ^= 1;
  ExpectRefused(s, s.buffer, LLM_ERR_INVALID_ARGUMENT, "saved from another model", other_model);

  SessionLoadExpect other_type = e;
  other_type.kv_type = GetParam() == KvType::kF16 ? KvType::kF32 : KvType::kF16;
  ExpectRefused(s, s.buffer, LLM_ERR_INVALID_ARGUMENT,
                GetParam() == KvType::kF16
                    ? "holds an F16 KV cache but this session's KV type is F32"
                    : "holds an F32 KV cache but this session's KV type is F16",
                other_type);

  for (int field = 0; field < 3; ++field) {
    KvLayout other = layout;
    (field == 0 ? other.n_layer : field == 1 ? other.n_head_kv : other.head_dim) += 1;
    HostKvPool pool(other, other.block_bytes() * 16);
    KvBlockTable fresh(&pool, GetParam(), kCtx);
    SessionState st = Sentinel();
    absl::Status status = DeserializeSession(s.buffer.data(), s.buffer.size(),
                                             Expect(GetParam(), &other), &st, &fresh);
    EXPECT_EQ(ToLlmStatus(status), LLM_ERR_INVALID_ARGUMENT) << status;
    EXPECT_NE(std::string(status.message()).find("KV layout"), std::string::npos) << status;
    EXPECT_EQ(fresh.n_positions(), 0);
    ExpectSentinel(st);
  }

  SessionLoadExpect small_ctx = e;
  small_ctx.n_ctx = kPositions - 1;
  ExpectRefused(s, s.buffer, LLM_ERR_CONTEXT_FULL, "37 tokens but this session's context is 36",
                small_ctx);

  SessionLoadExpect other_vocab = e;
  other_vocab.n_vocab = kVocab + 1;
  ExpectRefused(s, s.buffer, LLM_ERR_INVALID_ARGUMENT, "logits cover 1000 tokens", other_vocab);
}

TEST_P(SessionStateTest, BadValuesBehindAValidChecksumAreRefused) {
  const KvLayout layout = TestLayout();
  Saved s = MakeSaved(GetParam(), 61);
  const SessionLoadExpect e = Expect(GetParam(), &layout);
  // The unpatched, re-sealed buffer still loads: the helper is right.
  {
    std::vector<uint8_t> same = s.buffer;
    FixChecksum(&same);
    ASSERT_EQ(same, s.buffer);
  }
  auto patched = [&](auto patch) {
    std::vector<uint8_t> b = s.buffer;
    patch(&b);
    FixChecksum(&b);
    return b;
  };

  ExpectRefused(s, patched([](std::vector<uint8_t>* b) { Put64(b, kOffNTokens, kCtx + 1); }),
                LLM_ERR_CONTEXT_FULL, "65 tokens", e);
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) { Put64(b, kOffNTokens, kPositions - 1); }),
                LLM_ERR_INVALID_ARGUMENT, "do not add up", e);
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) {
                  Put64(b, kOffNTokens, std::numeric_limits<uint64_t>::max());
                }),
                LLM_ERR_CONTEXT_FULL, "context", e);
  for (uint32_t bad : {static_cast<uint32_t>(kVocab), static_cast<uint32_t>(-1), 0x7fffffffu}) {
    ExpectRefused(s, patched([&](std::vector<uint8_t>* b) { Put32(b, kHeaderBytes + 4 * 5, bad); }),
                  LLM_ERR_INVALID_ARGUMENT, "token 5 of the history", e);
  }
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) { Put32(b, kOffFlags, 5); }),
                LLM_ERR_INVALID_ARGUMENT, "unknown flags", e);
  // Bit 1: KV rotated with LongRoPE's long factors, which this session
  // (expect.rope_long false) does not use.
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) { Put32(b, kOffFlags, 3); }),
                LLM_ERR_INVALID_ARGUMENT, "long LongRoPE factors", e);
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) { Put32(b, kOffFlags, 0); }),
                LLM_ERR_INVALID_ARGUMENT, "without the has-logits flag", e);
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) { Put32(b, 12, 7); }),
                LLM_ERR_INVALID_ARGUMENT, "unknown KV type 7", e);

  const uint32_t nan = FloatBits(std::numeric_limits<float>::quiet_NaN());
  ExpectRefused(s, patched([&](std::vector<uint8_t>* b) { Put32(b, kOffSampler + 0, nan); }),
                LLM_ERR_INVALID_ARGUMENT, "sampler settings", e);
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) { Put32(b, kOffSampler + 16, 0); }),
                LLM_ERR_INVALID_ARGUMENT, "sampler settings", e);
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) {
                  Put32(b, kOffSampler + 28, static_cast<uint32_t>(-2));
                }),
                LLM_ERR_INVALID_ARGUMENT, "sampler settings", e);
  ExpectRefused(s, patched([](std::vector<uint8_t>* b) {
                  for (int i = 0; i < 4; ++i) Put64(b, kOffRng + 8 * i, 0);
                }),
                LLM_ERR_INVALID_ARGUMENT, "RNG state is all zero", e);
}

TEST_P(SessionStateTest, PoolTooSmallIsKvFullAndCommitsNothing) {
  const KvLayout layout = TestLayout();
  Saved s = MakeSaved(GetParam(), 71);
  // One block holds 16 (F16) or 8 (F32) positions; 37 need several.
  HostKvPool tiny(layout, layout.block_bytes());
  KvBlockTable fresh(&tiny, GetParam(), kCtx);
  SessionState st = Sentinel();
  absl::Status status = DeserializeSession(s.buffer.data(), s.buffer.size(),
                                           Expect(GetParam(), &layout), &st, &fresh);
  EXPECT_EQ(ToLlmStatus(status), LLM_ERR_KV_FULL) << status;
  EXPECT_EQ(fresh.n_positions(), 0);
  ExpectSentinel(st);
}

INSTANTIATE_TEST_SUITE_P(KvTypes, SessionStateTest, ::testing::Values(KvType::kF16, KvType::kF32),
                         [](const auto& info) {
                           return std::string(info.param == KvType::kF16 ? "F16" : "F32");
                         });

// ---- ModelFingerprint --------------------------------------------------

std::string TinyPath(const std::string& type) {
  const char* dir = std::getenv("LLM_TINY_MODEL_DIR");
  const std::string d =
      (dir != nullptr && *dir != '\0') ? dir : std::string(LLM_TEST_DATA_DIR) + "/tiny";
  return d + "/tiny-llama-" + type + ".gguf";
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

uint64_t FingerprintOf(const std::vector<uint8_t>& bytes) {
  auto g = GgufFile::Parse(bytes.data(), bytes.size());
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? ModelFingerprint(**g) : 0;
}

TEST(ModelFingerprintTest, SameModelSameValueOtherModelOtherValue) {
  auto a = GgufFile::Open(TinyPath("Q8_0"));
  auto b = GgufFile::Open(TinyPath("Q8_0"));
  auto q4 = GgufFile::Open(TinyPath("Q4_0"));
  ASSERT_TRUE(a.ok() && b.ok() && q4.ok());
  EXPECT_EQ(ModelFingerprint(**a), ModelFingerprint(**b));
  EXPECT_NE(ModelFingerprint(**a), ModelFingerprint(**q4));
  // A copy in memory is the same model.
  const std::vector<uint8_t> bytes = ReadAll(TinyPath("Q8_0"));
  EXPECT_EQ(FingerprintOf(bytes), ModelFingerprint(**a));
}

TEST(ModelFingerprintTest, TensorEdgeBytesAndHyperParametersCount) {
  const std::vector<uint8_t> bytes = ReadAll(TinyPath("Q8_0"));
  auto g = GgufFile::Parse(bytes.data(), bytes.size());
  ASSERT_TRUE(g.ok()) << g.status();
  const uint64_t base = ModelFingerprint(**g);
  std::mt19937 rng(81);
  const auto& tensors = (*g)->tensors();
  for (int trial = 0; trial < 6; ++trial) {
    const GgufTensor& t = tensors[rng() % tensors.size()];
    ASSERT_GE(t.n_bytes, 1024u) << t.name;  // so the middle byte is outside both edges
    SCOPED_TRACE(t.name);
    std::vector<uint8_t> first = bytes;
    first[t.offset + rng() % 256] ^= static_cast<uint8_t>(1 + rng() % 255);
    EXPECT_NE(FingerprintOf(first), base);
    std::vector<uint8_t> last = bytes;
    last[t.offset + t.n_bytes - 1 - rng() % 256] ^= static_cast<uint8_t>(1 + rng() % 255);
    EXPECT_NE(FingerprintOf(last), base);
    // The middle is not read (cheap; a fingerprint of models, not of files).
    std::vector<uint8_t> middle = bytes;
    middle[t.offset + t.n_bytes / 2] ^= 0x55;
    EXPECT_EQ(FingerprintOf(middle), base);
  }
  // A hyper-parameter ("llama.rope.freq_base", f32) changes it: the key's
  // bytes are followed by the u32 type and the value.
  const std::string key = "llama.rope.freq_base";
  auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(it, bytes.end());
  std::vector<uint8_t> hp = bytes;
  const size_t value_at = static_cast<size_t>(it - bytes.begin()) + key.size() + 4;
  hp[value_at + 2] ^= 1;  // 10000.0f -> another finite value
  EXPECT_NE(FingerprintOf(hp), base);
}

}  // namespace
}  // namespace llm
