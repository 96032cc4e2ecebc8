#include "tokenizer/streaming_detokenizer.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace llm {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string StreamingDetokenizer::Push(int32_t token) {
  pending_ += tokenizer_.TokenToPiece(token, render_special_);
  std::string out;
  std::string_view rest(pending_);
  while (!rest.empty()) {
    size_t invalid_len = 1;
    const int len = Utf8WellFormedPrefix(rest, &invalid_len);
    if (len == 0) break;  // incomplete tail: wait for more bytes
    if (len > 0) {
      out.append(rest.data(), static_cast<size_t>(len));
      rest.remove_prefix(static_cast<size_t>(len));
    } else {
      AppendUtf8(kReplacementChar, &out);
      rest.remove_prefix(invalid_len);
    }
  }
  pending_ = std::string(rest);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out;
  if (!pending_.empty()) AppendUtf8(kReplacementChar, &out);
  pending_.clear();
  return out;
}

}  // namespace llm
