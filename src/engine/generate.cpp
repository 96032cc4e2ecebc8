#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/status.h"
#include "tokenizer/streaming_detokenizer.h"

namespace llm {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Text waiting to be emitted, held back only while its tail could still grow
// into a stop string.
class StopStringFilter {
 public:
  explicit StopStringFilter(const std::vector<std::string>& stop) : stop_(stop) {}

  // Appends text. Returns the text that is safe to emit; sets *stopped when a
  // stop string appeared (the text before it is returned, the rest dropped).
  std::string Push(std::string_view text, bool* stopped) {
    pending_.append(text);
    size_t cut = std::string::npos;
    for (const std::string& s : stop_) {
      if (s.empty()) continue;
      cut = std::min(cut, pending_.find(s));
    }
    if (cut != std::string::npos) {
      *stopped = true;
      std::string out = pending_.substr(0, cut);
      pending_.clear();
      return out;
    }
    // Hold back the longest tail that is a proper prefix of some stop string.
    size_t hold = 0;
    for (const std::string& s : stop_) {
      for (size_t len = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); len > hold; --len) {
        if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
          hold = len;
          break;
        }
      }
    }
    std::string out = pending_.substr(0, pending_.size() - hold);
    pending_.erase(0, pending_.size() - hold);
    return out;
  }

  std::string Flush() { return std::exchange(pending_, std::string()); }

 private:
  const std::vector<std::string>& stop_;
  std::string pending_;
};

}  // namespace

absl::StatusOr<GenerateResult> Generate(Session& session, absl::Span<const int32_t> prompt,
                                        const GenerateOptions& options) {
  if (options.max_tokens <= 0) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "max_tokens = %d must be > 0", options.max_tokens);
  }
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

}  // namespace llm
