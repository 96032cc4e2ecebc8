// Contract tests on how a backend binds weights: WeightSource's row_bytes
// (rows may be padded: row o starts at data + o * row_bytes) and refusing at
// binding time a type it cannot run. The CPU backend fails both today (see
// the notes at each test); they are kept apart from backend_contract_test.cpp
// so that they can be landed together with the fix.
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/ref/reference_kernels.h"
#include "tests/backend/contract/backend_contract.h"

namespace llm {
namespace contract {
namespace {

// CPU today: the F32 GEMM path (more than 16 rows, not deterministic) reads
// an F32 weight as dense [n_out][n_in] floats and ignores row_bytes
// (backend/cpu/linear.cpp: w_f32 = reinterpret_cast<const float*>(w.data)),
// so outputs 1.. of a padded F32 weight are garbage at 17 and 64 rows.
TEST_P(BackendContract, LinearHonoursPaddedRows) {
  for (DType t : ContractWeightTypes()) {
    ResetBackend();
    const int64_t n_in = OddInnerSizes(t)[1], n_out = 37;
    const HostWeight w = AddRandomMatrix(t, n_out, n_in, /*pad=*/4);
    const ActivationId y = b().DeclareActivation(n_out, ActivationRows::kTokens);
    for (int64_t rows : {1, 16, 17, 64}) {
      const std::string what = TypeName(t) + " padded rows, n_in=" + std::to_string(n_in) +
                               " rows=" + std::to_string(rows);
      Input x = DeclareInput(rows, n_in);
      const OwnedPass pass = MakePass({{rows, 0}});
      ASSERT_TRUE(b().BeginPass(pass.desc()).ok());
      ASSERT_TRUE(b().Embed(x.table.id, x.act).ok());
      ASSERT_TRUE(b().Linear({w.id}, x.act, {y}).ok());
      ASSERT_TRUE(b().EndPass().ok());
      const std::vector<float> got = ReadRows(y, rows);
      std::vector<double> want(static_cast<size_t>(rows * n_out)), abs_sum(want.size());
      const std::vector<double> xd(x.rows.begin(), x.rows.end());
      ref::RefMatMul(w.values.data(), xd.data(), n_out, n_in, rows, want.data(), abs_sum.data());
      const double tol = LinearToleranceFor(t).max_rel;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]), tol * abs_sum[i])
            << what << ": row " << i / n_out << " out " << i % n_out << " got " << got[i]
            << " want " << want[i];
      }
    }
  }
}

// CPU today: AddMatrix records any type and the failure comes only from the
// first Linear that uses it (backend.h: "Unsupported type ->
// LLM_ERR_UNSUPPORTED naming the tensor", at binding).
TEST_P(BackendContract, WeightBindingRefusesWhatItCannotRun) {
  // A type the backend does not support -> LLM_ERR_UNSUPPORTED at binding.
  // Q8_K: a known type (activations only), 292 bytes per 256.
  std::vector<uint8_t> bytes(4 * 292, 1);
  const uint8_t* kept = Keep(bytes);
  WeightSource src{"contract.q8k", DType::kQ8_K, kept, 4, 256, 292};
  auto m = b().AddMatrix(src);
  EXPECT_FALSE(m.ok()) << "AddMatrix accepted a Q8_K weight";
  if (!m.ok()) {
    EXPECT_EQ(ToLlmStatus(m.status()), LLM_ERR_UNSUPPORTED) << m.status();
    EXPECT_NE(std::string(m.status().message()).find("contract.q8k"), std::string::npos)
        << "the error should name the tensor: " << m.status();
  }
  src.n_out = 1;
  auto vec = b().AddVector(src);
  EXPECT_FALSE(vec.ok());
  if (!vec.ok()) {
    EXPECT_EQ(ToLlmStatus(vec.status()), LLM_ERR_UNSUPPORTED) << vec.status();
  }
}

}  // namespace
}  // namespace contract
}  // namespace llm
