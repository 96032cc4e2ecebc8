// The backend contract (backend_contract.h): every operation of
// backend/backend.h against the float64 oracle, through the interface only.
// Each TEST_P runs once per ContractBackend a backend instantiates.
#include "tests/backend/contract/backend_contract.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/ref/reference_kernels.h"

namespace llm {
namespace contract {
namespace {

const int64_t kRowCounts[] = {1, 7, 16, 17, 64};

std::vector<double> ToDouble(const float* p, size_t n) { return std::vector<double>(p, p + n); }

// Linear/Logits outputs y [rows][w.n_out] against x [rows][w.n_in] · wᵀ in
// float64, with w's tolerance (LinearToleranceFor).
void ExpectLinear(const HostWeight& w, const std::vector<double>& x, int64_t rows, const float* y,
                  const std::string& what) {
  std::vector<double> want(static_cast<size_t>(rows * w.n_out)), abs_sum(want.size());
  ref::RefMatMul(w.values.data(), x.data(), w.n_out, w.n_in, rows, want.data(), abs_sum.data());
  const LinearTolerance tol = LinearToleranceFor(w.type);
  double sq = 0.0, worst = 0.0;
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double rel = std::fabs(y[i] - want[i]) / abs_sum[i];
    if (!(rel <= tol.max_rel) && ++bad <= 3) {  // NaN fails too
      ADD_FAILURE() << what << ": row " << i / w.n_out << " out " << i % w.n_out << " got " << y[i]
                    << " want " << want[i] << " (error " << rel << " of sum|w x| " << abs_sum[i]
                    << ", tolerance " << tol.max_rel << ")";
    }
    worst = std::max(worst, rel);
    sq += rel * rel;
  }
  const double rms = std::sqrt(sq / static_cast<double>(want.size()));
  EXPECT_LE(rms, tol.rms_rel) << what << ": RMS relative error (worst " << worst << ")";
}

// ---- Embed ---------------------------------------------------------------------

TEST_P(BackendContract, EmbedGathersRowsOfEveryType) {
  for (DType t : ContractWeightTypes()) {
    ResetBackend();
    for (int64_t n_in : OddInnerSizes(t)) {
      const size_t pad = n_in == OddInnerSizes(t)[1] ? 6 : 0;  // padded rows too
      const int64_t n_vocab = 37;
      const HostWeight table = AddRandomMatrix(t, n_vocab, n_in, pad);
      const ActivationId out = b().DeclareActivation(n_in, ActivationRows::kTokens);
      for (int64_t rows : kRowCounts) {
        SCOPED_TRACE(TypeName(t) + " n_in=" + std::to_string(n_in) +
                     " rows=" + std::to_string(rows));
        std::vector<int32_t> tokens;
        for (int64_t r = 0; r < rows; ++r)
          tokens.push_back(static_cast<int32_t>(rng()() % n_vocab));
        const OwnedPass pass = MakePass({{rows, 0}}, tokens);
        ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
        ASSERT_TRUE(b().Embed(table.id, out).ok());
        ASSERT_TRUE(b().EndPass().ok());
        const std::vector<float> got = ReadRows(out, rows);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < n_in; ++i) {
            const size_t k = static_cast<size_t>(tokens[r] * n_in + i);
            // f32 dequantization rounds each term of a value: a few ulps.
            ASSERT_NEAR(got[r * n_in + i], table.values[k], 4e-7 * table.scale[k])
                << "row " << r << " (token " << tokens[r] << ") element " << i;
          }
        }
      }
    }
  }
}

// ---- RmsNorm -------------------------------------------------------------------

TEST_P(BackendContract, RmsNormMatchesReference) {
  for (DType wt : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (int64_t n : {97, 161, 1280}) {
      for (float eps : {1e-5f, 1e-6f}) {
        for (bool in_place : {false, true}) {
          ResetBackend();
          const HostWeight w = AddRandomVector(wt, n);
          const int64_t rows = 17;
          Input in = DeclareInput(rows, n, 0.01f, 3.0f);
          const ActivationId out =
              in_place ? in.act : b().DeclareActivation(n, ActivationRows::kTokens);
          SCOPED_TRACE(TypeName(wt) + " n=" + std::to_string(n) + " eps=" + std::to_string(eps) +
                       (in_place ? " in place" : ""));
          const OwnedPass pass = MakePass({{3, 0}, {14, 9}});
          ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
          ASSERT_TRUE(b().Embed(in.table.id, in.act).ok());
          ASSERT_TRUE(b().RmsNorm(in.act, w.id, eps, out).ok());
          ASSERT_TRUE(b().EndPass().ok());
          const std::vector<float> got = ReadRows(out, rows);
          std::vector<double> want(static_cast<size_t>(n));
          for (int64_t r = 0; r < rows; ++r) {
            const std::vector<double> x = ToDouble(in.rows.data() + r * n, static_cast<size_t>(n));
            ref::RefRmsNorm(x.data(), w.values.data(), n, eps, want.data());
            for (int64_t i = 0; i < n; ++i) {
              ASSERT_NEAR(got[r * n + i], want[i], 1e-5 * std::fabs(want[i]) + 1e-7)
                  << "row " << r << " element " << i;
            }
          }
        }
      }
    }
  }
}

// ---- Rope ----------------------------------------------------------------------

TEST_P(BackendContract, RopeUsesEachRowsPositionNormalAndNeox) {
  struct Case {
    int64_t head_dim, rope_dims, n_heads;
    float base;
  };
  // Several sequences, different pos0 and lengths, one of them empty.
  const std::vector<SeqSpec> seqs = {{7, 0}, {1, 300}, {0, 12}, {17, 45}, {5, 1000}, {3, 16}};
  int64_t rows = 0;
  std::vector<int64_t> pos;
  for (const SeqSpec& s : seqs) {
    for (int64_t t = 0; t < s.n_rows; ++t) pos.push_back(s.pos0 + t);
    rows += s.n_rows;
  }
  for (const Case& c : {Case{64, 64, 3, 10000.0f}, Case{64, 32, 3, 10000.0f}, Case{40, 24, 5, 1e6f},
                        Case{128, 128, 2, 500000.0f}}) {
    ResetBackend();
    const int64_t width = c.n_heads * c.head_dim;
    // Per pass: a normal and a neox rope, then the first spec again (a
    // backend caching angles must key them on the spec), over two passes
    // (positions change between passes).
    Input a = DeclareInput(rows, width), n = DeclareInput(rows, width),
          a2 = DeclareInput(rows, width);
    for (int pass_i = 0; pass_i < 2; ++pass_i) {
      std::vector<SeqSpec> ss = seqs;
      if (pass_i == 1) {
        for (SeqSpec& s : ss) s.pos0 += 13;
      }
      SCOPED_TRACE("head_dim=" + std::to_string(c.head_dim) +
                   " rope_dims=" + std::to_string(c.rope_dims) + " pass " + std::to_string(pass_i));
      RopeSpec normal;
      normal.head_dim = c.head_dim;
      normal.rope_dims = c.rope_dims;
      normal.freq_base = c.base;
      RopeSpec neox = normal;
      neox.neox = true;
      const OwnedPass pass = MakePass(ss);
      ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
      ASSERT_TRUE(b().Embed(a.table.id, a.act).ok());
      ASSERT_TRUE(b().Embed(n.table.id, n.act).ok());
      ASSERT_TRUE(b().Embed(a2.table.id, a2.act).ok());
      ASSERT_TRUE(b().Rope(a.act, c.n_heads, normal).ok());
      ASSERT_TRUE(b().Rope(n.act, c.n_heads, neox).ok());
      ASSERT_TRUE(b().Rope(a2.act, c.n_heads, normal).ok());
      ASSERT_TRUE(b().EndPass().ok());
      struct Obs {
        const Input* in;
        bool neox;
      };
      for (const Obs& o : {Obs{&a, false}, Obs{&n, true}, Obs{&a2, false}}) {
        const std::vector<float> got = ReadRows(o.in->act, rows);
        for (int64_t r = 0, k = 0; r < rows; ++r) {
          const int64_t p = pos[static_cast<size_t>(k++)] + (pass_i == 1 ? 13 : 0);
          std::vector<double> x =
              ToDouble(o.in->rows.data() + r * width, static_cast<size_t>(width));
          const std::vector<double> x0 = x;
          ref::RefRope(x.data(), c.n_heads, c.head_dim, c.rope_dims, p, c.base, o.neox);
          // f32 angles: theta = pos * base^(-2i/d) is off by ~pos ulps.
          const double tol = 2e-6 + 4e-7 * static_cast<double>(p);
          for (int64_t i = 0; i < width; ++i) {
            const int64_t d = i % c.head_dim;
            if (d >= c.rope_dims) {
              ASSERT_EQ(got[r * width + i], o.in->rows[r * width + i])
                  << "dim " << d << " >= rope_dims must not move (row " << r << ")";
              continue;
            }
            const int64_t half = c.rope_dims / 2;
            const int64_t partner =
                o.neox ? (d < half ? i + half : i - half) : (d % 2 ? i - 1 : i + 1);
            ASSERT_NEAR(got[r * width + i], x[i], tol * (std::fabs(x0[i]) + std::fabs(x0[partner])))
                << (o.neox ? "neox" : "normal") << " row " << r << " pos " << p << " element " << i;
          }
        }
      }
    }
  }
}

// ---- Linear --------------------------------------------------------------------

TEST_P(BackendContract, LinearEveryTypeRowCountAndOddInnerSize) {
  for (DType t : ContractWeightTypes()) {
    ResetBackend();
    for (int64_t n_in : OddInnerSizes(t)) {
      const int64_t n_out = 37;
      const HostWeight w = AddRandomMatrix(t, n_out, n_in);
      const ActivationId y = b().DeclareActivation(n_out, ActivationRows::kTokens);
      for (int64_t rows : kRowCounts) {
        const std::string what =
            TypeName(t) + " n_in=" + std::to_string(n_in) + " rows=" + std::to_string(rows);
        SCOPED_TRACE(what);
        Input x = DeclareInput(rows, n_in);
        // Rows split over two sequences (Linear does not care).
        const OwnedPass pass = MakePass({{rows / 2, 3}, {rows - rows / 2, 0}});
        ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
        ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
        ASSERT_TRUE(b().Linear({w.id}, x.act, {y}).ok());
        ASSERT_TRUE(b().EndPass().ok());
        const std::vector<float> got = ReadRows(y, rows);
        ExpectLinear(w, ToDouble(x.rows.data(), x.rows.size()), rows, got.data(), what);
      }
    }
  }
}

TEST_P(BackendContract, LinearSharedInputTwoToFourWeights) {
  struct Group {
    int64_t n_in;
    std::vector<DType> types;
    std::vector<int64_t> n_out;
  };
  const std::vector<Group> groups = {
      {768, {DType::kQ4_K, DType::kQ4_K, DType::kQ6_K}, {45, 15, 15}},  // Q/K/V, GQA 3
      {160, {DType::kQ8_0, DType::kQ8_0, DType::kQ8_0}, {45, 15, 15}},
      {96, {DType::kQ4_0, DType::kQ4_1}, {53, 53}},  // gate/up
      {161, {DType::kF16, DType::kBF16, DType::kF32}, {13, 7, 9}},
      {160, {DType::kF16, DType::kBF16, DType::kF32, DType::kQ8_0}, {13, 7, 9, 11}},
      {768, {DType::kQ4_K, DType::kQ8_0, DType::kF16, DType::kQ6_K}, {9, 17, 5, 3}},  // mixed paths
  };
  for (const Group& g : groups) {
    ResetBackend();
    std::vector<HostWeight> ws;
    std::vector<WeightId> ids;
    std::vector<ActivationId> outs;
    for (size_t i = 0; i < g.types.size(); ++i) {
      ws.push_back(AddRandomMatrix(g.types[i], g.n_out[i], g.n_in));
      ids.push_back(ws.back().id);
      outs.push_back(b().DeclareActivation(g.n_out[i], ActivationRows::kTokens));
    }
    for (int64_t rows : kRowCounts) {
      Input x = DeclareInput(rows, g.n_in);
      const OwnedPass pass = MakePass({{rows, 0}});
      ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
      ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
      ASSERT_TRUE(b().Linear(ids, x.act, outs).ok());
      ASSERT_TRUE(b().EndPass().ok());
      for (size_t i = 0; i < ws.size(); ++i) {
        const std::string what = "weight " + std::to_string(i) + " of " +
                                 std::to_string(ws.size()) + " (" + TypeName(g.types[i]) +
                                 ") n_in=" + std::to_string(g.n_in) +
                                 " rows=" + std::to_string(rows);
        const std::vector<float> got = ReadRows(outs[i], rows);
        ExpectLinear(ws[i], ToDouble(x.rows.data(), x.rows.size()), rows, got.data(), what);
      }
    }
  }
}

TEST_P(BackendContract, LinearRefusesBadArgumentsAndStaysUsable) {
  const HostWeight a = AddRandomMatrix(DType::kF16, 5, 97);
  const HostWeight c = AddRandomMatrix(DType::kF16, 5, 161);
  Input x = DeclareInput(3, 97);
  const ActivationId y = b().DeclareActivation(5, ActivationRows::kTokens);
  const ActivationId wide = b().DeclareActivation(7, ActivationRows::kTokens);
  const OwnedPass pass = MakePass({{3, 0}});
  ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
  ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
  EXPECT_FALSE(b().Linear({}, x.act, {}).ok()) << "no weights";
  EXPECT_FALSE(b().Linear({a.id, a.id, a.id, a.id, a.id}, x.act, {y, y, y, y, y}).ok())
      << "5 weights";
  EXPECT_FALSE(b().Linear({a.id, a.id}, x.act, {y}).ok()) << "2 weights, 1 output";
  EXPECT_FALSE(b().Linear({a.id, c.id}, x.act, {y, y}).ok()) << "different n_in";
  EXPECT_FALSE(b().Linear({c.id}, x.act, {y}).ok()) << "input narrower than n_in";
  EXPECT_FALSE(b().Linear({a.id}, x.act, {wide}).ok()) << "output of the wrong width";
  EXPECT_FALSE(b().Linear({WeightId{12345, 5, 97}}, x.act, {y}).ok()) << "unknown weight";
  // The pass goes on: a valid product after the refusals is right.
  ASSERT_TRUE(b().Linear({a.id}, x.act, {y}).ok());
  ASSERT_TRUE(b().EndPass().ok());
  const std::vector<float> got = ReadRows(y, 3);
  ExpectLinear(a, ToDouble(x.rows.data(), x.rows.size()), 3, got.data(), "after refusals");
}

// ---- SwiGlu, Add ---------------------------------------------------------------

TEST_P(BackendContract, SwiGluSeparateAndInPlace) {
  for (int which = 0; which < 3; ++which) {  // out separate, out == gate, out == up
    for (int64_t rows : kRowCounts) {
      ResetBackend();
      const int64_t n = 161;
      Input gate = DeclareInput(rows, n, 0.05f, 8.0f), up = DeclareInput(rows, n);
      const ActivationId out = which == 0   ? b().DeclareActivation(n, ActivationRows::kTokens)
                               : which == 1 ? gate.act
                                            : up.act;
      SCOPED_TRACE("out=" +
                   std::string(which == 0   ? "separate"
                               : which == 1 ? "gate"
                                            : "up") +
                   " rows=" + std::to_string(rows));
      const OwnedPass pass = MakePass({{rows, 0}});
      ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
      ASSERT_TRUE(b().Embed(gate.table.id, gate.act).ok());
      ASSERT_TRUE(b().Embed(up.table.id, up.act).ok());
      ASSERT_TRUE(b().SwiGlu(gate.act, up.act, out).ok());
      ASSERT_TRUE(b().EndPass().ok());
      const std::vector<float> got = ReadRows(out, rows);
      std::vector<double> want(gate.rows.size());
      const std::vector<double> g = ToDouble(gate.rows.data(), gate.rows.size());
      const std::vector<double> u = ToDouble(up.rows.data(), up.rows.size());
      ref::RefSwiGlu(g.data(), u.data(), static_cast<int64_t>(want.size()), want.data());
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-5 * std::fabs(want[i]) + 1e-7) << "element " << i;
      }
    }
  }
}

TEST_P(BackendContract, AddIsExact) {
  for (int64_t rows : kRowCounts) {
    ResetBackend();
    const int64_t n = 97;
    Input x = DeclareInput(rows, n, 0.05f, 100.0f), y = DeclareInput(rows, n);
    const OwnedPass pass = MakePass({{rows, 0}});
    ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
    ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
    ASSERT_TRUE(b().Embed(y.table.id, y.act).ok());
    ASSERT_TRUE(b().Add(x.act, y.act).ok());
    ASSERT_TRUE(b().EndPass().ok());
    const std::vector<float> got = ReadRows(x.act, rows);
    for (size_t i = 0; i < got.size(); ++i) {
      // One f32 addition: the correctly rounded sum, bit for bit.
      ASSERT_EQ(got[i], static_cast<float>(static_cast<double>(x.rows[i]) + y.rows[i]))
          << "rows=" << rows << " element " << i;
    }
  }
}

// ---- Logits --------------------------------------------------------------------

TEST_P(BackendContract, LogitsOnlyForSequencesThatWantThem) {
  for (DType t : ContractWeightTypes()) {
    ResetBackend();
    const int64_t n_embd = OddInnerSizes(t)[0], n_vocab = 53;
    const float eps = 1e-5f;
    const HostWeight norm = AddRandomVector(DType::kF32, n_embd);
    const HostWeight output = AddRandomMatrix(t, n_vocab, n_embd);
    const ActivationId logits = b().DeclareActivation(n_vocab, ActivationRows::kLogitRows);
    // Mixed: empty sequences wanting logits produce no row; 18 sampling
    // sequences in the second pass (more than a 16-row decode batch).
    std::vector<std::vector<SeqSpec>> passes = {
        {{3, 0, true}, {0, 4, true}, {5, 2, false}, {1, 9, true}, {17, 0, true}, {2, 0, false}},
        {}};
    for (int i = 0; i < 18; ++i) passes[1].push_back({1 + i % 3, i, true});
    for (const std::vector<SeqSpec>& specs : passes) {
      int64_t rows = 0;
      std::vector<int64_t> logit_rows;  // the pass row of each logit row
      for (const SeqSpec& s : specs) {
        rows += s.n_rows;
        if (s.wants_logits && s.n_rows > 0) logit_rows.push_back(rows - 1);
      }
      SCOPED_TRACE(TypeName(t) + " rows=" + std::to_string(rows));
      Input x = DeclareInput(rows, n_embd, 0.01f, 3.0f);
      const OwnedPass pass = MakePass(specs);
      ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
      ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
      ASSERT_TRUE(b().Logits(x.act, norm.id, eps, output.id, logits).ok());
      ASSERT_TRUE(b().EndPass().ok());
      const int64_t n = static_cast<int64_t>(logit_rows.size());
      std::vector<float> got(static_cast<size_t>(n * n_vocab));
      std::vector<double> xn(static_cast<size_t>(n * n_embd));
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(b().ReadActivation(logits, i, got.data() + i * n_vocab).ok())
            << "logit row " << i;
        const std::vector<double> xr =
            ToDouble(x.rows.data() + logit_rows[i] * n_embd, static_cast<size_t>(n_embd));
        ref::RefRmsNorm(xr.data(), norm.values.data(), n_embd, eps, xn.data() + i * n_embd);
      }
      std::vector<float> sink(static_cast<size_t>(n_vocab));
      EXPECT_FALSE(b().ReadActivation(logits, n, sink.data()).ok()) << "a logit row past the last";
      EXPECT_FALSE(b().ReadActivation(logits, -1, sink.data()).ok());
      ExpectLinear(output, xn, n, got.data(), "logits of " + TypeName(t));
    }
  }
}

// ---- KV storage ------------------------------------------------------------------

TEST_P(BackendContract, KvStorageWriteReadCopyRoundTrips) {
  const KvLayout layout{3, 2, 40};
  KvStorage* kv = Kv(layout);
  ASSERT_NE(kv, nullptr);
  const size_t bb = layout.block_bytes();
  ASSERT_TRUE(kv->AddBlocks(0, 5));
  std::vector<std::vector<uint8_t>> host(7, std::vector<uint8_t>(bb));
  for (int32_t i = 0; i < 5; ++i) {
    for (uint8_t& c : host[i]) c = static_cast<uint8_t>(rng()());
    ASSERT_TRUE(kv->WriteBlock(i, host[i].data()).ok());
  }
  std::vector<uint8_t> back(bb);
  for (int32_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(kv->ReadBlock(i, back.data()).ok());
    ASSERT_EQ(back, host[i]) << "block " << i;
  }
  ASSERT_TRUE(kv->CopyBlock(1, 3).ok());
  host[3] = host[1];
  // Growing keeps what the old blocks hold.
  ASSERT_TRUE(kv->AddBlocks(5, 2));
  for (int32_t i = 5; i < 7; ++i) {
    for (uint8_t& c : host[i]) c = static_cast<uint8_t>(rng()());
    ASSERT_TRUE(kv->WriteBlock(i, host[i].data()).ok());
  }
  ASSERT_TRUE(kv->CopyBlock(6, 0).ok());
  host[0] = host[6];
  for (int32_t i = 0; i < 7; ++i) {
    ASSERT_TRUE(kv->ReadBlock(i, back.data()).ok());
    ASSERT_EQ(back, host[i]) << "block " << i;
  }
  // Blocks without storage are refused, not crashed on.
  EXPECT_FALSE(kv->ReadBlock(7, back.data()).ok());
  EXPECT_FALSE(kv->ReadBlock(-1, back.data()).ok());
  EXPECT_FALSE(kv->WriteBlock(99, back.data()).ok());
  EXPECT_FALSE(kv->CopyBlock(0, 7).ok());
  EXPECT_FALSE(kv->CopyBlock(7, 0).ok());
  ASSERT_TRUE(kv->ReadBlock(0, back.data()).ok());
  EXPECT_EQ(back, host[0]) << "a refused copy changed its source";
}

// ---- StoreKv + Attention -----------------------------------------------------------

// The host's model of a sequence's KV: the f32 values per layer and position
// that WriteBlock (history) or StoreKv (the pass's rows) were given.
struct HostSeq {
  SeqSpec spec;
  std::vector<std::vector<float>> k, v;  // [layer][pos * row_elems]
};

uint16_t Half(float f) { return F32ToF16(f); }
double RoundKv(float f, KvType t) { return t == KvType::kF16 ? F16ToF32(Half(f)) : f; }

void PutKvElem(uint8_t* p, KvType t, float f) {
  if (t == KvType::kF16) {
    const uint16_t h = Half(f);
    std::memcpy(p, &h, 2);
  } else {
    std::memcpy(p, &f, 4);
  }
}

// window 0: full causal attention. window 5 (shorter than some prefills) and
// 19 (more than an F16 block): sliding-window attention, with the blocks
// wholly before each sequence's first window released (-1), as a windowed
// block table passes them; the reference applies llama.cpp's mask.
TEST_P(BackendContract, StoreKvAndAttentionOverShuffledSharedPartlyFilledBlocks) {
  for (int64_t window : {0, 5, 19})
  for (KvType T : {KvType::kF16, KvType::kF32}) {
    for (int64_t head_dim : {64, 37}) {
      ResetBackend();
      const KvType U = T == KvType::kF16 ? KvType::kF32 : KvType::kF16;
      const int64_t n_head_kv = 2, n_head = 6, n_layer = 2;  // GQA: 3 query heads per kv head
      const KvLayout L{n_layer, n_head_kv, head_dim};
      KvStorage* kv = Kv(L);
      ASSERT_NE(kv, nullptr);
      const int64_t re = L.row_elems();
      const int64_t bt = KvLayout::block_tokens(T), bu = KvLayout::block_tokens(U);
      SCOPED_TRACE(std::string(T == KvType::kF16 ? "F16" : "F32") +
                   " KV, head_dim=" + std::to_string(head_dim) +
                   ", window=" + std::to_string(window));

      // Block ids: a shuffled pool, every block poisoned with NaN bytes so
      // that reading a position past a sequence's end shows.
      const int32_t n_blocks = 40;
      ASSERT_TRUE(kv->AddBlocks(0, n_blocks));
      std::vector<int32_t> ids(n_blocks);
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng());
      const std::vector<uint8_t> poison(L.block_bytes(), 0xFF);
      for (int32_t id : ids) ASSERT_TRUE(kv->WriteBlock(id, poison.data()).ok());
      size_t next = 0;
      auto take = [&](int64_t n) {
        std::vector<int32_t> out;
        for (int64_t i = 0; i < n; ++i) out.push_back(ids[next++]);
        return out;
      };

      // The sequences (the shared prefix: blocks 0, 1 of s2 are s3's too).
      std::vector<SeqSpec> specs;
      specs.push_back({7, 0, true, T, take(1)});           // prefill, block part full
      specs.push_back({0, 3, true, T, take(1)});           // empty sequence
      specs.push_back({1, 2 * bt + 3, true, T, take(3)});  // decode after history
      std::vector<int32_t> fork = {specs[2].blocks[0], specs[2].blocks[1]};
      for (int32_t id : take((2 * bt + 5 + 4 + bt - 1) / bt - 2)) fork.push_back(id);
      specs.push_back({4, 2 * bt + 5, false, T, fork});  // fork of s2's prefix
      specs.push_back({17, bu - 3, true, U, take((bu - 3 + 17 + bu - 1) / bu)});  // other KV type
      specs.push_back({1, 5, true, T, take(1)});                                  // short history
      const size_t n_seq = specs.size();

      // History (positions < pos0) of each sequence, both layers, through
      // WriteBlock in kv_layout.h's layout; the fork sees s2's prefix values.
      std::vector<HostSeq> hs(n_seq);
      for (size_t s = 0; s < n_seq; ++s) {
        hs[s].spec = specs[s];
        const int64_t n_pos = specs[s].pos0 + specs[s].n_rows;
        hs[s].k.assign(n_layer, std::vector<float>(static_cast<size_t>(n_pos * re)));
        hs[s].v = hs[s].k;
        for (int64_t l = 0; l < n_layer; ++l) {
          for (int64_t p = 0; p < specs[s].pos0; ++p) {
            for (int64_t e = 0; e < re; ++e) {
              float kval = NonZero(rng()), vval = NonZero(rng());
              if (s == 3 && p < 2 * bt) {  // shared with s2
                kval = hs[2].k[l][p * re + e];
                vval = hs[2].v[l][p * re + e];
              }
              hs[s].k[l][p * re + e] = kval;
              hs[s].v[l][p * re + e] = vval;
            }
          }
        }
      }
      std::vector<uint8_t> blk(L.block_bytes());
      auto elem_ptr = [&](uint8_t* base, KvType t, bool is_v, int64_t l, int64_t p, int64_t e) {
        const size_t off = is_v ? L.v_offset(t, l) : L.k_offset(t, l);
        return base + off +
               static_cast<size_t>((p % KvLayout::block_tokens(t)) * re + e) *
                   KvLayout::elem_bytes(t);
      };
      for (size_t s = 0; s < n_seq; ++s) {
        const KvType t = specs[s].kv_type;
        const int64_t bts = KvLayout::block_tokens(t);
        for (int64_t p = 0; p < specs[s].pos0; ++p) {
          const int32_t id = specs[s].blocks[p / bts];
          ASSERT_TRUE(kv->ReadBlock(id, blk.data()).ok());
          for (int64_t l = 0; l < n_layer; ++l) {
            for (int64_t e = 0; e < re; ++e) {
              PutKvElem(elem_ptr(blk.data(), t, false, l, p, e), t, hs[s].k[l][p * re + e]);
              PutKvElem(elem_ptr(blk.data(), t, true, l, p, e), t, hs[s].v[l][p * re + e]);
            }
          }
          ASSERT_TRUE(kv->WriteBlock(id, blk.data()).ok());
        }
      }
      // Snapshot of every block before the pass.
      std::vector<std::vector<uint8_t>> before(n_blocks, std::vector<uint8_t>(L.block_bytes()));
      for (int32_t id = 0; id < n_blocks; ++id)
        ASSERT_TRUE(kv->ReadBlock(id, before[id].data()).ok());

      // A windowed table's released blocks: those whose positions are all
      // before the first query's window. Poisoned and never passed.
      std::vector<SeqSpec> pass_specs = specs;
      if (window > 0) {
        for (SeqSpec& sp : pass_specs) {
          const int64_t bts = KvLayout::block_tokens(sp.kv_type);
          const int64_t first = std::max<int64_t>(0, sp.pos0 + 1 - window);
          for (int64_t k = 0; (k + 1) * bts <= first; ++k) sp.blocks[k] = -1;
        }
      }

      // The pass: per layer, q/k/v from Embed, StoreKv, Attention.
      int64_t rows = 0;
      for (const SeqSpec& s : specs) rows += s.n_rows;
      std::vector<Input> q, k, v;
      std::vector<ActivationId> out;
      for (int64_t l = 0; l < n_layer; ++l) {
        q.push_back(DeclareInput(rows, n_head * head_dim));
        k.push_back(DeclareInput(rows, re));
        v.push_back(DeclareInput(rows, re));
        out.push_back(b().DeclareActivation(n_head * head_dim, ActivationRows::kTokens));
      }
      const OwnedPass pass = MakePass(pass_specs);
      {
        const absl::Status st = b().BeginPass(pass.desc());
        ASSERT_TRUE(st.ok()) << st;
      }
      for (int64_t l = n_layer - 1; l >= 0; --l) {  // layer 1 first: offsets must not matter
        ASSERT_TRUE(b().Embed(q[l].table.id, q[l].act).ok());
        ASSERT_TRUE(b().Embed(k[l].table.id, k[l].act).ok());
        ASSERT_TRUE(b().Embed(v[l].table.id, v[l].act).ok());
        ASSERT_TRUE(b().StoreKv(l, k[l].act, v[l].act).ok());
        const absl::Status st = b().Attention(l, n_head, window, q[l].act, out[l]);
        ASSERT_TRUE(st.ok()) << st;
      }
      ASSERT_TRUE(b().EndPass().ok());

      // New K/V into the host model.
      for (size_t s = 0; s < n_seq; ++s) {
        for (int64_t t = 0; t < specs[s].n_rows; ++t) {
          const int64_t row = pass.sequences[s].row0 + t, p = specs[s].pos0 + t;
          for (int64_t l = 0; l < n_layer; ++l) {
            std::copy_n(k[l].rows.data() + row * re, re, hs[s].k[l].data() + p * re);
            std::copy_n(v[l].rows.data() + row * re, re, hs[s].v[l].data() + p * re);
          }
        }
      }

      // Attention outputs against the float64 reference over the rounded KV.
      const double tol_f16 = 5e-3, tol_f32 = 5e-5;
      for (int64_t l = 0; l < n_layer; ++l) {
        const std::vector<float> got = ReadRows(out[l], rows);
        for (size_t s = 0; s < n_seq; ++s) {
          const SeqSpec& sp = specs[s];
          if (sp.n_rows == 0) continue;
          const int64_t n_pos = sp.pos0 + sp.n_rows, w = n_head * head_dim;
          std::vector<double> kd(static_cast<size_t>(n_pos * re)), vd(kd.size());
          for (size_t i = 0; i < kd.size(); ++i) {
            kd[i] = RoundKv(hs[s].k[l][i], sp.kv_type);
            vd[i] = RoundKv(hs[s].v[l][i], sp.kv_type);
          }
          const int64_t row0 = pass.sequences[s].row0;
          const std::vector<double> qd =
              ToDouble(q[l].rows.data() + row0 * w, static_cast<size_t>(sp.n_rows * w));
          std::vector<double> want(qd.size()), scale(qd.size());
          ref::RefAttention(qd.data(), sp.n_rows, n_head, sp.pos0, kd.data(), vd.data(), n_head_kv,
                            head_dim, want.data(), scale.data(), window);
          const double tol = sp.kv_type == KvType::kF16 ? tol_f16 : tol_f32;
          for (size_t i = 0; i < want.size(); ++i) {
            const float g = got[row0 * w + i];
            ASSERT_TRUE(std::fabs(g - want[i]) <= tol * scale[i])
                << "layer " << l << " sequence " << s << " query " << i / w << " head "
                << (i % w) / head_dim << " dim " << i % head_dim << ": got " << g << " want "
                << want[i] << " (tolerance " << tol << " x " << scale[i] << ")";
          }
        }
      }

      // The blocks after the pass: history and shared blocks unchanged, the
      // new positions hold the stored rows (f16: round to nearest even), the
      // rest still poison.
      for (int32_t id = 0; id < n_blocks; ++id) {
        std::vector<uint8_t> want = before[id];
        for (size_t s = 0; s < n_seq; ++s) {
          const SeqSpec& sp = specs[s];
          const int64_t bts = KvLayout::block_tokens(sp.kv_type);
          for (int64_t p = sp.pos0; p < sp.pos0 + sp.n_rows; ++p) {
            if (sp.blocks[p / bts] != id) continue;
            for (int64_t l = 0; l < n_layer; ++l) {
              for (int64_t e = 0; e < re; ++e) {
                PutKvElem(elem_ptr(want.data(), sp.kv_type, false, l, p, e), sp.kv_type,
                          hs[s].k[l][p * re + e]);
                PutKvElem(elem_ptr(want.data(), sp.kv_type, true, l, p, e), sp.kv_type,
                          hs[s].v[l][p * re + e]);
              }
            }
          }
        }
        ASSERT_TRUE(kv->ReadBlock(id, blk.data()).ok());
        size_t first_diff = 0;
        while (first_diff < blk.size() && blk[first_diff] == want[first_diff]) ++first_diff;
        ASSERT_EQ(first_diff, blk.size()) << "block " << id << " differs at byte " << first_diff
                                          << " from what StoreKv should have left";
      }
    }
  }
}

// ---- BeginPass validation ----------------------------------------------------------

TEST_P(BackendContract, BeginPassRefusesBadTilingAndStaysUsable) {
  const std::vector<int32_t> blocks = FreshBlocks(4);
  const std::vector<int32_t> tokens = {0, 1, 2, 3, 4};
  auto seq = [&](int64_t row0, int64_t n_rows, int64_t pos0, int64_t n_blocks = 2) {
    PassSequence s;
    s.row0 = row0;
    s.n_rows = n_rows;
    s.pos0 = pos0;
    s.kv = KvBlockList{absl::MakeConstSpan(blocks.data(), static_cast<size_t>(n_blocks)),
                       KvType::kF16};
    return s;
  };
  struct Bad {
    const char* why;
    std::vector<PassSequence> seqs;
    size_t n_tokens;
  };
  const int32_t missing[] = {0, 1000};
  PassSequence no_storage = seq(0, 5, 14);
  no_storage.kv = KvBlockList{absl::MakeConstSpan(missing), KvType::kF16};
  const std::vector<Bad> bad = {
      {"a gap between sequences", {seq(0, 2, 0), seq(3, 2, 0)}, 5},
      {"overlapping sequences", {seq(0, 3, 0), seq(2, 3, 0)}, 5},
      {"sequences out of order", {seq(2, 3, 0), seq(0, 2, 0)}, 5},
      {"rows do not cover the tokens", {seq(0, 2, 0), seq(2, 2, 0)}, 5},
      {"rows past the tokens", {seq(0, 3, 0), seq(3, 3, 0)}, 5},
      {"negative n_rows", {seq(0, -1, 0), seq(-1, 6, 0)}, 5},
      {"negative pos0", {seq(0, 5, -2)}, 5},
      {"too few KV blocks", {seq(0, 5, 30)}, 5},
      {"too few KV blocks (F32)",
       {[&] {
         auto s = seq(0, 5, 12);
         s.kv.type = KvType::kF32;
         return s;
       }()},
       5},
      {"a block without storage", {no_storage}, 5},
  };
  Input x = DeclareInput(5, 33), y = DeclareInput(5, 33);
  for (const Bad& c : bad) {
    const PassDesc d{absl::MakeConstSpan(tokens.data(), c.n_tokens), c.seqs};
    EXPECT_FALSE(b().BeginPass(d).ok()) << c.why;
  }
  // A good pass afterwards works.
  const OwnedPass pass = MakePass({{2, 0}, {3, 7}});
  ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
  ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
  ASSERT_TRUE(b().Embed(y.table.id, y.act).ok());
  ASSERT_TRUE(b().Add(x.act, y.act).ok());
  ASSERT_TRUE(b().EndPass().ok());
  const std::vector<float> got = ReadRows(x.act, 5);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], static_cast<float>(static_cast<double>(x.rows[i]) + y.rows[i])) << i;
  }
}

}  // namespace
}  // namespace contract
}  // namespace llm
