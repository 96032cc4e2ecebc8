// The backend contract on the CPU backend, once per SIMD level (scalar, avx2,
// avx512); the levels this host lacks are instantiated too and skipped with
// the reason, so the log names them. Plus the deterministic (batch-invariant)
// mode at the host's best level.

#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_features.h"
#include "core/status.h"
#include "tests/backend/contract/backend_contract.h"

namespace llm {
namespace contract {
namespace {

// ---- the instances ----------------------------------------------------------------

ContractBackend CpuAt(SimdLevel level, bool deterministic) {
  ContractBackend c;
  c.name = std::string("cpu_") + SimdLevelName(level) + (deterministic ? "_deterministic" : "");
  c.create = [deterministic]() {
    BackendOptions o;
    o.n_threads = 2;  // the pool's split of work is part of what is checked
    o.deterministic = deterministic;
    return CreateCpuBackend(o);
  };
  if (static_cast<int>(level) > static_cast<int>(DetectSimdLevel())) {
    c.skip = std::string("this host has no ") + SimdLevelName(level) +
             " (best: " + SimdLevelName(DetectSimdLevel()) + ")";
  }
  c.enter = [level] { SetSimdLevelForTesting(level); };
  c.leave = [] { SetSimdLevelForTesting(std::nullopt); };
  return c;
}

std::vector<ContractBackend> CpuContractBackends() {
  return {CpuAt(SimdLevel::kScalar, false), CpuAt(SimdLevel::kAvx2, false),
          CpuAt(SimdLevel::kAvx512, false), CpuAt(DetectSimdLevel(), true)};
}

INSTANTIATE_TEST_SUITE_P(BackendContractCpu, BackendContract,
                         ::testing::ValuesIn(CpuContractBackends()), ContractBackendName);

// The instance really runs at its level (SetSimdLevelForTesting clamps).
TEST(BackendContractCpuLevels, EnterSelectsTheLevel) {
  for (const ContractBackend& c : CpuContractBackends()) {
    if (!c.skip.empty()) {
      std::cout << "[ CONTRACT ] skipped on this host: " << c.name << " (" << c.skip << ")\n";
      continue;
    }
    c.enter();
    auto b = c.create();
    ASSERT_TRUE(b.ok());
    EXPECT_NE((*b)->Describe().find(c.name.substr(4, c.name.find('_', 4) - 4)), std::string::npos)
        << (*b)->Describe() << " for " << c.name;
    c.leave();
  }
}

}  // namespace
}  // namespace contract
}  // namespace llm
