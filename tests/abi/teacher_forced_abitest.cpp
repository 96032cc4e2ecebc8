// Whole-model correctness against llama.cpp (through llama-cpp-python).
//
// tools/gen_teacher_goldens.py recorded, for each prompt, the reference's
// greedy 32-token continuation and the full logits vector [n_vocab] at each
// position that predicts a continuation token. Here libllm is fed the same
// token ids (teacher forcing: the reference's tokens, not its own) through the
// public C API and compares its logits at every one of those positions:
//   - where the reference's top-1 logit beats its top-2 by >= 0.5, libllm's
//     top-1 must be the same token (all such positions);
//   - the top-1 agreement rate over all positions is reported;
//   - over all positions and vocabulary entries: mean |diff| <= 0.1 and
//     max |diff| <= 1.0.
// The goldens store logits as int16 with scale 1/inv_scale (1/64 for
// SmolLM2, 1/4096 for the tiny models), so each reference value carries up to
// 1/128 of rounding error: far below the 0.1 / 1.0 tolerances and the 0.5
// margin (the reference top-1 id itself is stored exactly).
//
// Also reported, not asserted: the same differences after removing each
// position's mean offset (softmax ignores a constant shift), the mean and max
// KL(reference || libllm) of the next-token distributions, and the spread
// (standard deviation) of the reference logits, to judge the tolerances by.
//
// Mutation testing (to show that the checks bite; never set in CI):
// LLM_TEACHER_MUTATION perturbs libllm's logits before they are compared:
//   offset=X  adds X to every logit;   noise=X  adds uniform noise in [-X, X];
//   scale=X   multiplies every logit by (1 + X);
//   swap=A,B  swaps the logits of token ids A and B at every position.
// LLM_TEACHER_GOLDEN=<name> replaces the golden of every case (e.g. the
// F32-KV golden for the F16-KV run: the wrong reference).
//
// Golden format: see the docstring of tools/gen_teacher_goldens.py.
// Reading the .gz uses zlib when the build defines LLM_HAVE_ZLIB (and links
// ZLIB::ZLIB), else `gzip -dc` through popen.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#ifdef LLM_HAVE_ZLIB
#include <zlib.h>
#endif

#include "gtest/gtest.h"
#include "llm/llm.h"
#include "test_util.h"

namespace {

constexpr char kMagic[8] = {'L', 'L', 'M', 'T', 'F', 'G', 'L', 'D'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kLayoutBytePlanar = 1;

struct GoldenPrompt {
  std::vector<int32_t> prompt;  // [n_prompt_tokens]
  std::vector<int32_t> cont;    // [n_cont] reference greedy tokens
  std::vector<int16_t> logits;  // [n_cont][n_vocab], q = round(logit * inv_scale)
};

struct Golden {
  uint32_t n_vocab = 0;
  uint32_t n_cont = 0;
  uint32_t inv_scale = 0;
  std::vector<GoldenPrompt> prompts;
};

// Decompresses a gzip file into *out. Returns false with *err on failure.
bool ReadGzipFile(const std::string &path, std::string *out, std::string *err) {
  out->clear();
  char buf[1 << 16];
#ifdef LLM_HAVE_ZLIB
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    *err = "gzopen failed: " + path;
    return false;
  }
  for (;;) {
    int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int code = 0;
      *err = std::string("gzread failed: ") + gzerror(f, &code);
      gzclose(f);
      return false;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  gzclose(f);
  return true;
#else
  // The path comes from the test itself (data dir + fixed name); quote it.
  std::string quoted = "'";
  for (char c : path) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += "'";
  FILE *p = popen(("gzip -dc " + quoted).c_str(), "r");
  if (p == nullptr) {
    *err = "popen(gzip -dc) failed";
    return false;
  }
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  int rc = pclose(p);
  if (rc != 0) {
    *err = "gzip -dc failed on " + path;
    return false;
  }
  return true;
#endif
}

// Bounds-checked little-endian reader over the decompressed bytes.
class Reader {
 public:
  explicit Reader(const std::string &data) : data_(data) {}
  size_t remaining() const { return data_.size() - pos_; }
  bool Bytes(void *dst, size_t n) {
    if (n > remaining()) return false;
    std::memcpy(dst, data_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool U32(uint32_t *v) {
    unsigned char b[4];
    if (!Bytes(b, 4)) return false;
    *v = uint32_t{b[0]} | uint32_t{b[1]} << 8 | uint32_t{b[2]} << 16 | uint32_t{b[3]} << 24;
    return true;
  }
  bool I32Array(size_t n, std::vector<int32_t> *v) {
    if (n > remaining() / 4) return false;  // checked before allocating
    v->resize(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t u = 0;
      if (!U32(&u)) return false;
      (*v)[i] = static_cast<int32_t>(u);
    }
    return true;
  }
  // One byte-planar int16 vector: n low bytes, then n high bytes.
  bool I16Planar(size_t n, int16_t *dst) {
    if (n > remaining() / 2) return false;
    const unsigned char *lo = reinterpret_cast<const unsigned char *>(data_.data()) + pos_;
    const unsigned char *hi = lo + n;
    for (size_t i = 0; i < n; ++i) {
      dst[i] = static_cast<int16_t>(static_cast<uint16_t>(lo[i] | (hi[i] << 8)));
    }
    pos_ += 2 * n;
    return true;
  }

 private:
  const std::string &data_;
  size_t pos_ = 0;
};

bool ParseGolden(const std::string &data, Golden *g, std::string *err) {
  Reader r(data);
  char magic[8];
  uint32_t version, n_prompts, layout;
  if (!r.Bytes(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) {
    *err = "bad magic";
    return false;
  }
  if (!r.U32(&version) || !r.U32(&g->n_vocab) || !r.U32(&n_prompts) || !r.U32(&g->n_cont) ||
      !r.U32(&g->inv_scale) || !r.U32(&layout)) {
    *err = "truncated header";
    return false;
  }
  if (version != kVersion || layout != kLayoutBytePlanar) {
    *err = "unsupported version/layout";
    return false;
  }
  if (g->n_vocab == 0 || g->n_vocab > (1u << 24) || g->n_cont == 0 || g->n_cont > 4096 ||
      g->inv_scale == 0 || n_prompts == 0 || n_prompts > 10000) {
    *err = "implausible header values";
    return false;
  }
  const size_t vec_bytes = size_t{g->n_vocab} * 2;
  for (uint32_t i = 0; i < n_prompts; ++i) {
    GoldenPrompt p;
    uint32_t n_prompt;
    if (!r.U32(&n_prompt) || n_prompt == 0 || !r.I32Array(n_prompt, &p.prompt) ||
        !r.I32Array(g->n_cont, &p.cont)) {
      *err = "truncated prompt record " + std::to_string(i);
      return false;
    }
    if (r.remaining() / vec_bytes < g->n_cont) {
      *err = "truncated logits of prompt " + std::to_string(i);
      return false;
    }
    p.logits.resize(size_t{g->n_cont} * g->n_vocab);
    for (uint32_t j = 0; j < g->n_cont; ++j) {
      r.I16Planar(g->n_vocab, p.logits.data() + size_t{j} * g->n_vocab);
    }
    for (int32_t t : p.prompt) {
      if (t < 0 || static_cast<uint32_t>(t) >= g->n_vocab) {
        *err = "prompt token out of range";
        return false;
      }
    }
    for (int32_t t : p.cont) {
      if (t < 0 || static_cast<uint32_t>(t) >= g->n_vocab) {
        *err = "continuation token out of range";
        return false;
      }
    }
    g->prompts.push_back(std::move(p));
  }
  if (r.remaining() != 0) {
    *err = "trailing bytes";
    return false;
  }
  return true;
}

struct ModelDeleter {
  void operator()(llm_model *m) const { llm_model_free(m); }
};
struct SessionDeleter {
  void operator()(llm_session *s) const { llm_session_free(s); }
};

struct Case {
  const char *name;       // test name suffix
  const char *golden;     // tests/data/golden/<golden>.teacher.bin.gz
  const char *tiny_type;  // nullptr: the real model (DefaultModelPath)
  int32_t kv_type;
};

// The tiny models' random weights give flat logits (std ~0.32, |logit| < 2),
// against which the absolute limits 0.1 / 1.0 say little. For them the
// differences must also stay small relative to the reference logits' spread:
// mean |diff| <= 0.05 std and max |diff| <= 0.5 std (measured at first
// landing: mean <= 0.012 std, max <= 0.08 std for all six types).
// gtest prints the parameter of a failing test with this.
void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

constexpr double kTinyMeanRelStd = 0.05;
constexpr double kTinyMaxRelStd = 0.5;

// The LLM_TEACHER_MUTATION perturbation (see the header comment).
struct Mutation {
  enum Kind { kNone, kOffset, kNoise, kScale, kSwap } kind = kNone;
  double x = 0.0;
  size_t a = 0, b = 0;
  uint64_t state = 0x9E3779B97F4A7C15ull;

  static Mutation FromEnv() {
    Mutation m;
    const std::string s = llm_abi_test::EnvOr("LLM_TEACHER_MUTATION", "");
    const size_t eq = s.find('=');
    if (s.empty() || eq == std::string::npos) return m;
    const std::string kind = s.substr(0, eq), arg = s.substr(eq + 1);
    if (kind == "offset") m.kind = kOffset;
    if (kind == "noise") m.kind = kNoise;
    if (kind == "scale") m.kind = kScale;
    if (kind == "swap") {
      m.kind = kSwap;
      m.a = std::stoul(arg);
      m.b = std::stoul(arg.substr(arg.find(',') + 1));
    } else if (m.kind != kNone) {
      m.x = std::stod(arg);
    }
    if (m.kind != kNone) std::printf("MUTATION %s (the checks should fail)\n", s.c_str());
    return m;
  }
  // Applies the perturbation to a copy of one logits vector.
  void Apply(std::vector<float> *v) {
    for (float &f : *v) {
      if (kind == kOffset) f += static_cast<float>(x);
      if (kind == kScale) f *= static_cast<float>(1.0 + x);
      if (kind == kNoise) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        const double u = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
        f += static_cast<float>((2.0 * u - 1.0) * x);
      }
    }
    if (kind == kSwap && a < v->size() && b < v->size()) std::swap((*v)[a], (*v)[b]);
  }
};

std::string ModelPathFor(const Case &c) {
  return c.tiny_type == nullptr ? llm_abi_test::DefaultModelPath()
                                : llm_abi_test::TinyModelPath(c.tiny_type);
}

class TeacherForcedTest : public ::testing::TestWithParam<Case> {};

TEST_P(TeacherForcedTest, LogitsMatchReference) {
  const Case &c = GetParam();
  const std::string model_path = ModelPathFor(c);
  const std::string golden_path = llm_abi_test::TestDataPath(
      "golden/" + llm_abi_test::EnvOr("LLM_TEACHER_GOLDEN", c.golden) + ".teacher.bin.gz");
  Mutation mutation = Mutation::FromEnv();
  LLM_ABI_REQUIRE_FILE(model_path);
  LLM_ABI_REQUIRE_FILE(golden_path);

  std::string raw, err;
  ASSERT_TRUE(ReadGzipFile(golden_path, &raw, &err)) << err;
  Golden g;
  ASSERT_TRUE(ParseGolden(raw, &g, &err)) << golden_path << ": " << err;
  raw.clear();
  raw.shrink_to_fit();

  llm_model *model_raw = nullptr;
  ASSERT_EQ(llm_model_load(model_path.c_str(), nullptr, &model_raw), LLM_OK)
      << model_path << ": " << llm_last_error();
  std::unique_ptr<llm_model, ModelDeleter> model(model_raw);

  llm_model_info info;
  ASSERT_EQ(llm_model_info_init(&info), LLM_OK);
  ASSERT_EQ(llm_model_get_info(model.get(), &info), LLM_OK) << llm_last_error();
  ASSERT_EQ(static_cast<uint32_t>(info.n_vocab), g.n_vocab)
      << "the golden was made for another model";

  size_t max_len = 0;
  for (const GoldenPrompt &p : g.prompts) max_len = std::max(max_len, p.prompt.size());
  llm_session_params sp;
  ASSERT_EQ(llm_session_params_init(&sp), LLM_OK);
  // Room for the longest prompt and its continuation, rounded up to 64 (the
  // tiny models are trained for 256 positions; the longest prompt needs 232).
  sp.n_ctx = static_cast<int32_t>((max_len + g.n_cont + 63) / 64 * 64);
  sp.kv_type = c.kv_type;

  const double scale = 1.0 / g.inv_scale;
  const size_t n_vocab = g.n_vocab;
  double sum_abs = 0.0, max_abs = 0.0;
  size_t max_at_prompt = 0, max_at_pos = 0, max_at_token = 0;
  size_t n_pos = 0, n_agree = 0, n_clear = 0, n_clear_agree = 0;
  double sum_centered = 0.0, max_centered = 0.0, sum_kl = 0.0, max_kl = 0.0;
  double ref_sum = 0.0, ref_sum_sq = 0.0;
  std::vector<double> ref(n_vocab);
  std::vector<float> mutated;

  for (size_t pi = 0; pi < g.prompts.size(); ++pi) {
    const GoldenPrompt &p = g.prompts[pi];
    // A fresh session per prompt: nothing carries over between prompts.
    llm_session *session_raw = nullptr;
    ASSERT_EQ(llm_session_create(model.get(), &sp, &session_raw), LLM_OK) << llm_last_error();
    std::unique_ptr<llm_session, SessionDeleter> session(session_raw);
    ASSERT_EQ(llm_session_prefill(session.get(), p.prompt.data(), p.prompt.size()), LLM_OK)
        << "prompt " << pi << ": " << llm_last_error();

    double p_sum = 0.0, p_max = 0.0;
    size_t p_agree = 0;
    for (size_t j = 0; j < g.n_cont; ++j) {
      const float *logits = nullptr;
      size_t nv = 0;
      ASSERT_EQ(llm_session_logits(session.get(), &logits, &nv), LLM_OK) << llm_last_error();
      ASSERT_NE(logits, nullptr);
      ASSERT_EQ(nv, n_vocab);
      if (mutation.kind != Mutation::kNone) {
        mutated.assign(logits, logits + nv);
        mutation.Apply(&mutated);
        logits = mutated.data();
      }

      const int16_t *q = p.logits.data() + j * n_vocab;
      for (size_t v = 0; v < n_vocab; ++v) ref[v] = q[v] * scale;
      const size_t ref_top = static_cast<size_t>(p.cont[j]);  // exact, from float logits
      double ref_second = -INFINITY;
      for (size_t v = 0; v < n_vocab; ++v) {
        if (v != ref_top) ref_second = std::max(ref_second, ref[v]);
      }
      const bool clear = ref[ref_top] - ref_second >= 0.5;

      // Shift-free differences and KL(ref || ours), in float64.
      double mean_d = 0.0, ref_max = -INFINITY, our_max = -INFINITY;
      for (size_t v = 0; v < n_vocab; ++v) {
        mean_d += static_cast<double>(logits[v]) - ref[v];
        ref_max = std::max(ref_max, ref[v]);
        our_max = std::max(our_max, static_cast<double>(logits[v]));
        ref_sum += ref[v];
        ref_sum_sq += ref[v] * ref[v];
      }
      mean_d /= static_cast<double>(n_vocab);
      double ref_z = 0.0, our_z = 0.0;
      for (size_t v = 0; v < n_vocab; ++v) {
        const double c = std::fabs(static_cast<double>(logits[v]) - ref[v] - mean_d);
        sum_centered += c;
        max_centered = std::max(max_centered, c);
        ref_z += std::exp(ref[v] - ref_max);
        our_z += std::exp(static_cast<double>(logits[v]) - our_max);
      }
      double kl = 0.0;
      for (size_t v = 0; v < n_vocab; ++v) {
        const double lp = ref[v] - ref_max - std::log(ref_z);
        const double lq = static_cast<double>(logits[v]) - our_max - std::log(our_z);
        kl += std::exp(lp) * (lp - lq);
      }
      sum_kl += kl;
      max_kl = std::max(max_kl, kl);

      size_t our_top = 0;
      for (size_t v = 0; v < n_vocab; ++v) {
        ASSERT_TRUE(std::isfinite(logits[v]))
            << "prompt " << pi << " position " << j << " token " << v;
        if (logits[v] > logits[our_top]) our_top = v;
        const double d = std::fabs(static_cast<double>(logits[v]) - ref[v]);
        p_sum += d;
        if (d > p_max) p_max = d;
        if (d > max_abs) {
          max_abs = d;
          max_at_prompt = pi;
          max_at_pos = j;
          max_at_token = v;
        }
      }
      ++n_pos;
      if (our_top == ref_top) {
        ++n_agree;
        ++p_agree;
      }
      if (clear) {
        ++n_clear;
        if (our_top == ref_top) {
          ++n_clear_agree;
        } else {
          ADD_FAILURE() << "prompt " << pi << " position " << j << ": reference top-1 " << ref_top
                        << " leads by " << (ref[ref_top] - ref_second) << " but libllm picks "
                        << our_top << " (libllm logits: " << logits[our_top] << " vs "
                        << logits[ref_top] << ")";
        }
      }
      // Teacher forcing: feed the reference's token, whatever libllm chose.
      if (j + 1 < g.n_cont) {
        const llm_token t = p.cont[j];
        ASSERT_EQ(llm_session_prefill(session.get(), &t, 1), LLM_OK)
            << "prompt " << pi << " position " << j << ": " << llm_last_error();
      }
    }
    sum_abs += p_sum;
    std::printf("[ %s ] prompt %2zu (%3zu tokens): top-1 %2zu/%u, mean |diff| %.4f, max %.4f\n",
                c.name, pi, p.prompt.size(), p_agree, g.n_cont,
                p_sum / (static_cast<double>(g.n_cont) * n_vocab), p_max);
  }

  const double mean_abs = sum_abs / (static_cast<double>(n_pos) * n_vocab);
  const double agreement = static_cast<double>(n_agree) / n_pos;
  const double n_all = static_cast<double>(n_pos) * n_vocab;
  const double mean_centered = sum_centered / n_all;
  const double mean_kl = sum_kl / n_pos;
  const double ref_std =
      std::sqrt(std::max(0.0, ref_sum_sq / n_all - (ref_sum / n_all) * (ref_sum / n_all)));
  std::printf(
      "[ %s ] %zu positions: top-1 agreement %.2f%% (%zu/%zu); clear-margin positions %zu/%zu "
      "agree; mean |diff| %.5f (limit 0.1), max |diff| %.4f (limit 1.0) at prompt %zu "
      "position %zu token %zu\n",
      c.name, n_pos, 100.0 * agreement, n_agree, n_pos, n_clear_agree, n_clear, mean_abs, max_abs,
      max_at_prompt, max_at_pos, max_at_token);
  std::printf(
      "[ %s ] reported only: reference logit std %.4f; shift-removed mean |diff| %.5f, max "
      "%.4f; KL(ref||libllm) mean %.3g, max %.3g nats\n",
      c.name, ref_std, mean_centered, max_centered, mean_kl, max_kl);
  std::fflush(stdout);
  RecordProperty("top1_agreement", std::to_string(agreement));
  RecordProperty("clear_positions", std::to_string(n_clear));
  RecordProperty("clear_agree", std::to_string(n_clear_agree));
  RecordProperty("mean_abs_diff", std::to_string(mean_abs));
  RecordProperty("max_abs_diff", std::to_string(max_abs));
  RecordProperty("ref_logit_std", std::to_string(ref_std));
  RecordProperty("centered_mean_abs_diff", std::to_string(mean_centered));
  RecordProperty("centered_max_abs_diff", std::to_string(max_centered));
  RecordProperty("mean_kl", std::to_string(mean_kl));
  RecordProperty("max_kl", std::to_string(max_kl));

  EXPECT_EQ(n_clear_agree, n_clear) << "top-1 must match wherever the reference margin >= 0.5";
  EXPECT_LE(mean_abs, 0.1);
  EXPECT_LE(max_abs, 1.0);
  if (c.tiny_type != nullptr) {
    EXPECT_LE(mean_abs, kTinyMeanRelStd * ref_std) << "relative to the reference logit spread";
    EXPECT_LE(max_abs, kTinyMaxRelStd * ref_std) << "relative to the reference logit spread";
  }
}

// The golden files themselves: the reader accepts each committed file,
// rejects truncations, and each recorded continuation token holds the largest
// quantized logit (rounding is monotone, and the token is the float argmax).
TEST(TeacherGoldenFormat, CommittedFilesParseAndTruncationsAreRejected) {
  const char *names[] = {"smollm2",         "smollm2-kvf32",   "tiny-llama-F16",  "tiny-llama-BF16", "tiny-llama-Q8_0",
                         "tiny-llama-Q4_0", "tiny-llama-Q4_K", "tiny-llama-Q6_K"};
  for (const char *name : names) {
    const std::string path =
        llm_abi_test::TestDataPath(std::string("golden/") + name + ".teacher.bin.gz");
    LLM_ABI_REQUIRE_FILE(path);
    std::string raw, err;
    ASSERT_TRUE(ReadGzipFile(path, &raw, &err)) << err;
    Golden g;
    ASSERT_TRUE(ParseGolden(raw, &g, &err)) << path << ": " << err;
    // The F32-KV golden is a smaller companion (8 prompts) of the main one.
    EXPECT_GE(g.prompts.size(), std::string(name) == "smollm2-kvf32" ? 8u : 20u) << path;
    EXPECT_EQ(g.n_cont, 32u) << path;
    for (const GoldenPrompt &p : g.prompts) {
      for (size_t j = 0; j < g.n_cont; ++j) {
        const int16_t *q = p.logits.data() + j * g.n_vocab;
        const int16_t top = *std::max_element(q, q + g.n_vocab);
        ASSERT_EQ(q[p.cont[j]], top) << path << " position " << j;
      }
    }
    // Truncations: header, ids, logits, and one byte short of the end.
    for (size_t cut : {size_t{0}, size_t{7}, size_t{31}, size_t{33}, size_t{100}, size_t{5000},
                       raw.size() / 2, raw.size() - 1}) {
      if (cut >= raw.size()) continue;
      Golden bad;
      EXPECT_FALSE(ParseGolden(raw.substr(0, cut), &bad, &err)) << path << " cut at " << cut;
    }
    Golden extra;
    EXPECT_FALSE(ParseGolden(raw + "x", &extra, &err)) << "trailing bytes accepted";
  }
}

INSTANTIATE_TEST_SUITE_P(SmolLM2, TeacherForcedTest,
                         // Each KV type against a reference run with the same KV type:
                         // this model amplifies a single f16 rounding into ~0.2 mean logit
                         // change, so an F16-KV reference cannot judge an F32-KV run.
                         ::testing::Values(Case{"SmolLM2_KvF32", "smollm2-kvf32", nullptr, LLM_KV_F32},
                                           Case{"SmolLM2_KvF16", "smollm2", nullptr, LLM_KV_F16}),
                         [](const ::testing::TestParamInfo<Case> &info) {
                           return std::string(info.param.name);
                         });

INSTANTIATE_TEST_SUITE_P(
    Tiny, TeacherForcedTest,
    ::testing::Values(Case{"Tiny_F16", "tiny-llama-F16", "F16", LLM_KV_F32},
                      Case{"Tiny_BF16", "tiny-llama-BF16", "BF16", LLM_KV_F32},
                      Case{"Tiny_Q8_0", "tiny-llama-Q8_0", "Q8_0", LLM_KV_F32},
                      Case{"Tiny_Q4_0", "tiny-llama-Q4_0", "Q4_0", LLM_KV_F32},
                      Case{"Tiny_Q4_K", "tiny-llama-Q4_K", "Q4_K", LLM_KV_F32},
                      Case{"Tiny_Q6_K", "tiny-llama-Q6_K", "Q6_K", LLM_KV_F32}),
    [](const ::testing::TestParamInfo<Case> &info) { return std::string(info.param.name); });

}  // namespace
