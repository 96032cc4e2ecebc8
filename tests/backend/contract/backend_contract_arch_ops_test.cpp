// The backend contract for the operations the non-llama architectures add
// (model/arch.h): scaled RoPE with frequency factors, GeGLU, bias add, scale,
// soft-cap, per-head RMSNorm, and attention with a score scale, soft-capping
// and a sliding window. Each against the float64 oracle on fresh random
// inputs of odd sizes, through the Backend interface only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/contract/backend_contract.h"

namespace llm {
namespace contract {
namespace {

std::vector<double> ToDouble(const float* p, size_t n) { return std::vector<double>(p, p + n); }

// Rope with freq_scale, attn_factor and per-pair frequency factors, over
// several sequences at different positions, both pair layouts.
TEST_P(BackendContract, RopeScaledWithFrequencyFactors) {
  const std::vector<SeqSpec> seqs = {{5, 0}, {1, 700}, {9, 33}};
  int64_t rows = 0;
  std::vector<int64_t> pos;
  for (const SeqSpec& s : seqs) {
    for (int64_t t = 0; t < s.n_rows; ++t) pos.push_back(s.pos0 + t);
    rows += s.n_rows;
  }
  struct Case {
    int64_t head_dim, rope_dims, n_heads;
    float base, freq_scale, attn_factor;
    bool factors, neox;
  };
  for (const Case& c : {Case{64, 64, 3, 500000.0f, 1.0f, 1.0f, true, false},
                        Case{48, 48, 5, 10000.0f, 0.25f, 1.0f, false, true},
                        Case{96, 96, 2, 10000.0f, 1.0f, 1.19f, true, true},
                        Case{40, 24, 3, 1e6f, 0.125f, 1.0f, true, true}}) {
    ResetBackend();
    const int64_t width = c.n_heads * c.head_dim, n_pairs = c.rope_dims / 2;
    SCOPED_TRACE("head_dim=" + std::to_string(c.head_dim) + " freq_scale=" +
                 std::to_string(c.freq_scale) + " attn_factor=" + std::to_string(c.attn_factor) +
                 (c.factors ? " factors" : "") + (c.neox ? " neox" : " normal"));
    Input x = DeclareInput(rows, width);
    RopeSpec spec;
    spec.head_dim = c.head_dim;
    spec.rope_dims = c.rope_dims;
    spec.freq_base = c.base;
    spec.neox = c.neox;
    spec.freq_scale = c.freq_scale;
    spec.attn_factor = c.attn_factor;
    std::vector<double> factors;
    if (c.factors) {
      // Llama-3-like factors: 1 .. 8 (F32 like the converter writes them).
      const HostWeight f = AddRandomVector(DType::kF32, n_pairs);
      for (double v : f.values) factors.push_back(1.0 + 7.0 * std::fabs(v));
      std::vector<float> ff(factors.begin(), factors.end());
      const HostWeight table = AddF32Matrix(ff, 1, n_pairs);  // only for its bytes
      WeightSource src;
      src.name = "rope_factors";
      src.type = DType::kF32;
      src.data = reinterpret_cast<const uint8_t*>(table.bytes);
      src.n_out = 1;
      src.n_in = n_pairs;
      src.row_bytes = static_cast<size_t>(n_pairs) * 4;
      auto id = b().AddVector(src);
      ASSERT_TRUE(id.ok()) << id.status();
      spec.freq_factors = *id;
    }
    const OwnedPass pass = MakePass(seqs);
    ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
    ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
    ASSERT_TRUE(b().Rope(x.act, c.n_heads, spec).ok());
    ASSERT_TRUE(b().EndPass().ok());
    const std::vector<float> got = ReadRows(x.act, rows);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<double> want = ToDouble(x.rows.data() + r * width, static_cast<size_t>(width));
      ref::RefRopeScaled(want.data(), c.n_heads, c.head_dim, c.rope_dims, pos[r], c.base, c.neox,
                         c.freq_scale, c.factors ? factors.data() : nullptr, c.attn_factor);
      // f32 angles: theta = pos * base^(-2i/d) is off by ~pos ulps.
      const double tol = 4e-6 + 4e-7 * static_cast<double>(pos[r]);
      for (int64_t i = 0; i < width; ++i) {
        ASSERT_NEAR(got[r * width + i], want[i], tol * c.attn_factor * 2.0)
            << "row " << r << " pos " << pos[r] << " element " << i;
      }
    }
  }
}

// Phi-3 LongRoPE in one pass: rows of rope_long sequences rotate with
// freq_factors_long, the others with freq_factors (sessions with contexts on
// both sides of the original context share passes), and a long sequence
// without long factors rotates unscaled (llama.cpp's missing
// rope_factors_long). Sequences interleaved: short, long, short, long.
TEST_P(BackendContract, RopeLongFactorsApplyPerSequence) {
  const std::vector<SeqSpec> seqs = {{5, 0}, {3, 600}, {4, 70}, {2, 9}};
  const std::vector<bool> is_long = {false, true, false, true};
  int64_t rows = 0;
  std::vector<int64_t> pos;
  std::vector<bool> row_long;
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int64_t t = 0; t < seqs[i].n_rows; ++t) {
      pos.push_back(seqs[i].pos0 + t);
      row_long.push_back(is_long[i]);
    }
    rows += seqs[i].n_rows;
  }
  // head_dim 48 = 3 x 16 (odd pair count 9 with rope_dims 18 in the second).
  for (const int64_t rope_dims : {int64_t{48}, int64_t{18}}) {
    for (const bool with_long : {true, false}) {
      ResetBackend();
      const int64_t head_dim = 48, n_heads = 3, width = n_heads * head_dim,
                    n_pairs = rope_dims / 2;
      SCOPED_TRACE("rope_dims=" + std::to_string(rope_dims) +
                   (with_long ? " long factors" : " no long factors"));
      Input x = DeclareInput(rows, width);
      // Factors as Phi-3's: short 1 .. 2, long 1 .. 16 (F32, as converted).
      auto add_factors = [&](double lo, double span, std::vector<double>* out) -> WeightId {
        const HostWeight f = AddRandomVector(DType::kF32, n_pairs);
        for (double v : f.values) out->push_back(lo + span * std::fabs(v));
        std::vector<float> ff(out->begin(), out->end());
        const HostWeight table = AddF32Matrix(ff, 1, n_pairs);  // only for its bytes
        WeightSource src;
        src.name = "rope_factors";
        src.type = DType::kF32;
        src.data = reinterpret_cast<const uint8_t*>(table.bytes);
        src.n_out = 1;
        src.n_in = n_pairs;
        src.row_bytes = static_cast<size_t>(n_pairs) * 4;
        auto id = b().AddVector(src);
        EXPECT_TRUE(id.ok()) << id.status();
        return id.ok() ? *id : WeightId{};
      };
      std::vector<double> f_short, f_long;
      RopeSpec spec;
      spec.head_dim = head_dim;
      spec.rope_dims = rope_dims;
      spec.freq_base = 10000.0f;
      spec.neox = true;
      spec.attn_factor = 1.19f;
      spec.freq_factors = add_factors(1.0, 1.0, &f_short);
      if (with_long) spec.freq_factors_long = add_factors(1.0, 15.0, &f_long);
      OwnedPass pass = MakePass(seqs);
      for (size_t i = 0; i < seqs.size(); ++i) pass.sequences[i].rope_long = is_long[i];
      ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
      ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
      // Twice with the same spec: the second call reuses the angles.
      ASSERT_TRUE(b().Rope(x.act, n_heads, spec).ok());
      ASSERT_TRUE(b().Rope(x.act, n_heads, spec).ok());
      ASSERT_TRUE(b().EndPass().ok());
      const std::vector<float> got = ReadRows(x.act, rows);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> want =
            ToDouble(x.rows.data() + r * width, static_cast<size_t>(width));
        const double* f = row_long[r] ? (with_long ? f_long.data() : nullptr) : f_short.data();
        for (int k = 0; k < 2; ++k) {
          ref::RefRopeScaled(want.data(), n_heads, head_dim, rope_dims, pos[r], spec.freq_base,
                             true, 1.0, f, spec.attn_factor);
        }
        const double tol = 2 * (4e-6 + 4e-7 * static_cast<double>(pos[r])) * 1.19 * 2.0;
        for (int64_t i = 0; i < width; ++i) {
          ASSERT_NEAR(got[r * width + i], want[i], tol)
              << "row " << r << " pos " << pos[r] << (row_long[r] ? " long" : " short")
              << " element " << i;
        }
      }
    }
  }
}

TEST_P(BackendContract, GeGluMatchesTanhGeluWithinF16Rounding) {
  for (int which = 0; which < 2; ++which) {  // out separate, out == gate
    for (int64_t rows : {1, 7, 17}) {
      ResetBackend();
      const int64_t n = 161;
      // Gate values over [-12, 12]: both the saturated ends and the curve.
      Input gate = DeclareInput(rows, n, 0.01f, 12.0f), up = DeclareInput(rows, n);
      const ActivationId out =
          which == 0 ? b().DeclareActivation(n, ActivationRows::kTokens) : gate.act;
      SCOPED_TRACE(std::string(which == 0 ? "separate" : "in place") +
                   " rows=" + std::to_string(rows));
      const OwnedPass pass = MakePass({{rows, 0}});
      ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
      ASSERT_TRUE(b().Embed(gate.table.id, gate.act).ok());
      ASSERT_TRUE(b().Embed(up.table.id, up.act).ok());
      ASSERT_TRUE(b().GeGlu(gate.act, up.act, out).ok());
      ASSERT_TRUE(b().EndPass().ok());
      const std::vector<float> got = ReadRows(out, rows);
      std::vector<double> want(gate.rows.size());
      const std::vector<double> g = ToDouble(gate.rows.data(), gate.rows.size());
      const std::vector<double> u = ToDouble(up.rows.data(), up.rows.size());
      ref::RefGeGlu(g.data(), u.data(), static_cast<int64_t>(want.size()), want.data());
      for (size_t i = 0; i < want.size(); ++i) {
        // ggml looks GELU up at x rounded to f16 and stores it as f16: a few
        // f16 ulps of x * gelu'(x) and of the result.
        const double x = g[i];
        const double tol = (2e-3 * std::fabs(x) + 1e-3) * std::fabs(u[i]) + 1e-6;
        ASSERT_NEAR(got[i], want[i], tol) << "element " << i << " gate " << x;
      }
    }
  }
}

TEST_P(BackendContract, AddBiasScaleAndSoftCap) {
  for (int64_t rows : {1, 7, 17}) {
    ResetBackend();
    const int64_t n = 97;
    const HostWeight bias = AddRandomVector(DType::kF32, n);
    Input x = DeclareInput(rows, n, 0.05f, 40.0f), y = DeclareInput(rows, n, 0.05f, 40.0f),
          z = DeclareInput(rows, n, 0.05f, 40.0f);
    const OwnedPass pass = MakePass({{rows, 0}});
    ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
    ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
    ASSERT_TRUE(b().Embed(y.table.id, y.act).ok());
    ASSERT_TRUE(b().Embed(z.table.id, z.act).ok());
    ASSERT_TRUE(b().AddBias(x.act, bias.id).ok());
    ASSERT_TRUE(b().Scale(y.act, 7.937254f).ok());
    ASSERT_TRUE(b().SoftCap(z.act, 30.0f).ok());
    ASSERT_FALSE(b().SoftCap(z.act, 0.0f).ok()) << "a soft-cap must be positive";
    ASSERT_TRUE(b().EndPass().ok());
    const std::vector<float> gx = ReadRows(x.act, rows), gy = ReadRows(y.act, rows),
                             gz = ReadRows(z.act, rows);
    for (int64_t i = 0; i < rows * n; ++i) {
      // One f32 addition / multiplication: correctly rounded.
      ASSERT_EQ(gx[i], static_cast<float>(static_cast<double>(x.rows[i]) + bias.values[i % n]))
          << "AddBias element " << i;
      ASSERT_EQ(gy[i], static_cast<float>(static_cast<double>(y.rows[i]) * 7.937254f))
          << "Scale element " << i;
      const double want = 30.0 * std::tanh(static_cast<double>(z.rows[i]) / 30.0);
      ASSERT_NEAR(gz[i], want, 4e-6 * std::fabs(want) + 1e-6) << "SoftCap element " << i;
    }
  }
}

TEST_P(BackendContract, HeadRmsNormNormsEachHead) {
  for (int64_t head_dim : {16, 37, 128}) {
    ResetBackend();
    const int64_t n_heads = 3, rows = 7, width = n_heads * head_dim;
    const HostWeight w = AddRandomVector(DType::kF32, head_dim);
    Input y = DeclareInput(rows, width, 0.01f, 3.0f);
    const OwnedPass pass = MakePass({{2, 0}, {5, 11}});
    ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
    ASSERT_TRUE(b().Embed(y.table.id, y.act).ok());
    ASSERT_TRUE(b().HeadRmsNorm(y.act, n_heads, w.id, 1e-6f).ok());
    ASSERT_TRUE(b().EndPass().ok());
    const std::vector<float> got = ReadRows(y.act, rows);
    std::vector<double> want(static_cast<size_t>(head_dim));
    for (int64_t r = 0; r < rows * n_heads; ++r) {
      const std::vector<double> v =
          ToDouble(y.rows.data() + r * head_dim, static_cast<size_t>(head_dim));
      ref::RefRmsNorm(v.data(), w.values.data(), head_dim, 1e-6, want.data());
      for (int64_t i = 0; i < head_dim; ++i) {
        ASSERT_NEAR(got[r * head_dim + i], want[i], 1e-5 * std::fabs(want[i]) + 1e-7)
            << "head-row " << r << " element " << i << " head_dim " << head_dim;
      }
    }
  }
}

// Attention with a custom scale, soft-capping and a sliding window, over two
// prefilled sequences (their K/V stored in the same pass), both KV types.
TEST_P(BackendContract, AttentionScaleSoftCapAndWindow) {
  struct Case {
    float scale, softcap;
    int64_t window;
  };
  for (KvType kv_type : {KvType::kF32, KvType::kF16}) {
    for (int64_t head_dim : {32, 37}) {
      for (const Case& c :
           {Case{0.3f, 0.0f, 0}, Case{0.0f, 2.5f, 0}, Case{0.0f, 0.0f, 9}, Case{0.21f, 4.0f, 16}}) {
        ResetBackend();
        const int64_t n_head = 4, n_head_kv = 2, n_layer = 1;
        const KvLayout L{n_layer, n_head_kv, head_dim};
        ASSERT_NE(Kv(L), nullptr);
        const std::vector<SeqSpec> seqs = {{23, 0, false, kv_type}, {40, 0, false, kv_type}};
        const int64_t rows = 63, qw = n_head * head_dim, kw = n_head_kv * head_dim;
        SCOPED_TRACE(std::string(kv_type == KvType::kF16 ? "F16" : "F32") +
                     " head_dim=" + std::to_string(head_dim) + " scale=" + std::to_string(c.scale) +
                     " softcap=" + std::to_string(c.softcap) +
                     " window=" + std::to_string(c.window));
        // Large-ish scores so that the soft-cap bends them.
        Input q = DeclareInput(rows, qw), k = DeclareInput(rows, kw, 0.05f, 2.0f),
              v = DeclareInput(rows, kw);
        const ActivationId out = b().DeclareActivation(qw, ActivationRows::kTokens);
        const OwnedPass pass = MakePass(seqs);
        ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
        ASSERT_TRUE(b().Embed(q.table.id, q.act).ok());
        ASSERT_TRUE(b().Embed(k.table.id, k.act).ok());
        ASSERT_TRUE(b().Embed(v.table.id, v.act).ok());
        ASSERT_TRUE(b().StoreKv(0, k.act, v.act).ok());
        AttentionSpec spec;
        spec.scale = c.scale;
        spec.softcap = c.softcap;
        ASSERT_TRUE(b().Attention(0, n_head, c.window, q.act, out, spec).ok());
        ASSERT_TRUE(b().EndPass().ok());
        const std::vector<float> got = ReadRows(out, rows);
        int64_t row0 = 0;
        for (const SeqSpec& s : seqs) {
          // The cache rounds K/V (and, with f16, q and the probabilities).
          auto cached = [&](const std::vector<float>& src) {
            std::vector<double> d(src.begin() + row0 * kw, src.begin() + (row0 + s.n_rows) * kw);
            if (kv_type == KvType::kF16) {
              for (double& e : d) e = F16ToF32(F32ToF16(static_cast<float>(e)));
            }
            return d;
          };
          const std::vector<double> kd = cached(k.rows), vd = cached(v.rows);
          std::vector<double> qd(q.rows.begin() + row0 * qw,
                                 q.rows.begin() + (row0 + s.n_rows) * qw);
          if (kv_type == KvType::kF16) {  // ggml multiplies an f16 cache by an f16 q
            for (double& e : qd) e = F16ToF32(F32ToF16(static_cast<float>(e)));
          }
          std::vector<double> want(qd.size());
          ref::RefAttentionSpec(qd.data(), s.n_rows, n_head, 0, kd.data(), vd.data(), n_head_kv,
                                head_dim, c.scale, c.softcap, c.window, want.data());
          const double tol = kv_type == KvType::kF16 ? 6e-3 : 2e-5;
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(got[row0 * qw + i], want[i], tol)
                << "row " << row0 + static_cast<int64_t>(i) / qw << " element " << i % qw;
          }
          row0 += s.n_rows;
        }
      }
    }
  }
}

}  // namespace
}  // namespace contract
}  // namespace llm
