// The backend contract on the CPU backend, once per SIMD level (scalar, avx2,
// avx512); the levels this host lacks are instantiated too and skipped with
// the reason, so the log names them. Plus the deterministic (batch-invariant)
// mode at the host's best level.
//
// Activation readback: until Backend has ReadActivation (see
// backend_contract.h), the CPU instances read the CPU backend's buffers
// through CpuReadActivationBridge below. The day the interface has it, the
// suite uses the interface method instead and the bridge can be deleted.
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

// ---- the temporary readback bridge ------------------------------------------------
// Reads a CPU activation row without changing src/: an explicit instantiation
// may name private members in its template arguments ([temp.spec] /
// [temp.explicit]: "the usual access checking rules do not apply"), and the
// friend it defines is the only code that uses them.
struct ActivationsTag {};
struct RowsTag {};
struct LogitRowsTag {};
template <typename Tag, auto kMember>
struct Stash {
  friend auto Member(Tag) { return kMember; }
};
auto Member(ActivationsTag);
auto Member(RowsTag);
auto Member(LogitRowsTag);
template struct Stash<ActivationsTag, &CpuBackend::activations_>;
template struct Stash<RowsTag, &CpuBackend::n_rows_>;
template struct Stash<LogitRowsTag, &CpuBackend::n_logit_rows_>;

absl::Status CpuReadActivationBridge(CpuBackend& b, ActivationId id, int64_t row, float* host) {
  const auto& acts = b.*Member(ActivationsTag{});
  if (id.index < 0 || static_cast<size_t>(id.index) >= acts.size() ||
      acts[id.index].width != id.width) {
    return absl::InvalidArgumentError("not a declared activation");
  }
  const auto& a = acts[id.index];
  const int64_t rows =
      a.rows == ActivationRows::kTokens ? b.*Member(RowsTag{}) : b.*Member(LogitRowsTag{});
  if (row < 0 || row >= rows) return absl::OutOfRangeError("row past the pass's rows");
  std::memcpy(host, a.data.data() + row * a.width, static_cast<size_t>(a.width) * sizeof(float));
  return absl::OkStatus();
}

ActivationReader CpuActivationReader() {
  if (kInterfaceHasReadActivation) return InterfaceActivationReader();
  return [](Backend& b, ActivationId id, int64_t row, float* host) -> absl::Status {
    auto* cpu = dynamic_cast<CpuBackend*>(&b);
    if (cpu == nullptr) return absl::InternalError("not the CPU backend");
    return CpuReadActivationBridge(*cpu, id, row, host);
  };
}

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
  c.read_activation = CpuActivationReader();
  if (static_cast<int>(level) > static_cast<int>(DetectSimdLevel())) {
    c.skip = std::string("this host has no ") + SimdLevelName(level) + " (best: " +
             SimdLevelName(DetectSimdLevel()) + ")";
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
