// Device selection: which backend a model's device choice gets.
#include "backend/backend.h"

#include "core/status.h"

namespace llm {

absl::Status CheckDevice(DeviceKind kind, int index) {
  switch (kind) {
    case DeviceKind::kAuto:
      return absl::OkStatus();
    case DeviceKind::kCpu:
      if (index != 0) {
        return Errorf(LLM_ERR_INVALID_ARGUMENT,
                      "device_index %d: the CPU is device 0 (LLM_DEVICE_CPU has no others)", index);
      }
      return absl::OkStatus();
    case DeviceKind::kCuda:
      return Error(LLM_ERR_UNSUPPORTED,
                   "LLM_DEVICE_CUDA: this libllm was built without the CUDA backend; load with "
                   "LLM_DEVICE_CPU or LLM_DEVICE_AUTO");
  }
  return Error(LLM_ERR_INVALID_ARGUMENT, "unknown device kind");
}

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(DeviceKind kind, int index,
                                                       const BackendOptions& options) {
  LLM_RETURN_IF_ERROR(CheckDevice(kind, index));
  // No GPU backend is built yet: kAuto and kCpu both get the CPU.
  return CreateCpuBackend(options);
}

}  // namespace llm
