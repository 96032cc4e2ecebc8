#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/status.h"
#include "engine/stop_strings.h"
#include "tokenizer/streaming_detokenizer.h"

namespace llm {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

absl::StatusOr<GenerateResult> GenerateSteps(Session& session, absl::Span<const int32_t> prompt,
                                             const GenerateOptions& options) {
  GenerateResult result;
  result.n_prompt_tokens = static_cast<int>(prompt.size());
  auto start = std::chrono::steady_clock::now();
  if (!prompt.empty()) LLM_RETURN_IF_ERROR(session.Prefill(prompt));
  result.prefill_ms = MsSince(start);
  if (!session.has_logits()) {
    return Error(LLM_ERR_INVALID_ARGUMENT, "prompt: empty prompt and no earlier prefill to continue from");
  }

  const Tokenizer& tokenizer = session.model().tokenizer();
  StreamingDetokenizer detok(tokenizer, /*render_special=*/false);
  StopStringFilter filter(options.stop);
  bool stop_string = false;
  bool callback_stop = false;
  auto emit = [&](const std::string& text) {
    if (text.empty() || callback_stop || !options.on_piece) return;
    if (!options.on_piece(text)) callback_stop = true;
  };

  start = std::chrono::steady_clock::now();
  result.stop_reason = StopReason::kMaxTokens;
  for (int i = 0; i < options.max_tokens; ++i) {
    if (static_cast<int64_t>(session.tokens().size()) >= session.n_ctx()) {
      result.stop_reason = StopReason::kContextFull;
      break;
    }
    LLM_ASSIGN_OR_RETURN(int32_t token, session.Decode());
    ++result.n_generated;
    if (tokenizer.IsEog(token)) {
      result.stop_reason = StopReason::kEog;
      break;
    }
    emit(filter.Push(detok.Push(token), &stop_string));
    if (stop_string) {
      result.stop_reason = StopReason::kStopString;
      break;
    }
    if (callback_stop) {
      result.stop_reason = StopReason::kCallback;
      break;
    }
  }
  if (!stop_string && !callback_stop) {
    emit(filter.Push(detok.Flush(), &stop_string));
    if (stop_string) {
      result.stop_reason = StopReason::kStopString;
    } else {
      emit(filter.Flush());
    }
    if (callback_stop) result.stop_reason = StopReason::kCallback;
  }
  result.decode_ms = MsSince(start);
  return result;
}

}  // namespace

absl::StatusOr<GenerateResult> Generate(Session& session, absl::Span<const int32_t> prompt,
                                        const GenerateOptions& options) {
  if (options.max_tokens <= 0) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "max_tokens = %d must be > 0", options.max_tokens);
  }
  LLM_RETURN_IF_ERROR(session.CheckNotCancelled());
  // A generation that fails (a cancel, a full KV pool, ...) leaves the
  // session as it was before the call, like a single step; pieces already
  // passed to on_piece are not taken back.
  Session::Checkpoint checkpoint = session.MakeCheckpoint();
  absl::StatusOr<GenerateResult> result = GenerateSteps(session, prompt, options);
  // A cancel that came after the last step (while detokenizing or in the
  // callback) still belongs to this call.
  if (result.ok() && session.TakeCancel()) {
    result = Error(LLM_ERR_CANCELLED, "cancelled by llm_session_cancel");
  }
  if (!result.ok()) {
    session.RollBack(checkpoint);
  } else {
    session.EndCheckpoint();
  }
  return result;
}

}  // namespace llm
