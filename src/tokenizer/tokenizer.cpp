#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <new>
#include <optional>

#include "core/oom_safe.h"
#include "core/status.h"
#include "format/gguf.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode.h"

namespace llm {
namespace {

constexpr size_t kMaxTextBytes = size_t{1} << 30;
constexpr int32_t kMaxVocab = 1 << 24;        // far above any real vocabulary
constexpr char kSpmSpace[] = "\xE2\x96\x81";  // U+2581, SentencePiece's space

// Token texts llama.cpp recognises when the metadata has no explicit id
// (llama-vocab.cpp, "auto-detect special tokens by text"). Each found token
// is also made a control token.
constexpr const char* kEotTexts[] = {"<|eot_id|>",
                                     "<|im_end|>",
                                     "<|end|>",
                                     "<end_of_turn>",
                                     "<|endoftext|>",
                                     "<|end_of_text|>",
                                     "<EOT>",
                                     "_<EOT>",
                                     "[EOT]",
                                     "<\xEF\xBD\x9C"
                                     "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                     "<end_of_utterance>"};
constexpr const char* kEomTexts[] = {"<|eom_id|>"};
constexpr const char* kFimPreTexts[] = {"<|fim_prefix|>",
                                        "<fim-prefix>",
                                        "<fim_prefix>",
                                        "<\xEF\xBD\x9C"
                                        "fim\xE2\x96\x81"
                                        "begin\xEF\xBD\x9C>",
                                        "<PRE>",
                                        "\xE2\x96\x81<PRE>",
                                        "<|code_prefix|>",
                                        "<|prefix|>"};
constexpr const char* kFimSufTexts[] = {"<|fim_suffix|>",
                                        "<fim-suffix>",
                                        "<fim_suffix>",
                                        "<\xEF\xBD\x9C"
                                        "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                                        "<SUF>",
                                        "\xE2\x96\x81<SUF>",
                                        "<|code_suffix|>",
                                        "<|suffix|>"};
constexpr const char* kFimMidTexts[] = {"<|fim_middle|>",
                                        "<fim-middle>",
                                        "<fim_middle>",
                                        "<\xEF\xBD\x9C"
                                        "fim\xE2\x96\x81"
                                        "end\xEF\xBD\x9C>",
                                        "<MID>",
                                        "\xE2\x96\x81<MID>",
                                        "<|code_middle|>",
                                        "<|middle|>"};
constexpr const char* kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr const char* kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>",
                                        "<reponame>"};
constexpr const char* kFimSepTexts[] = {"<|file_sep|>"};
// End-of-generation texts (llama.cpp's special_eog_ids list).
constexpr const char* kEogTexts[] = {"<|eot_id|>",
                                     "<|im_end|>",
                                     "<|end|>",
                                     "<|return|>",
                                     "<|call|>",
                                     "<|flush|>",
                                     "<|calls|>",
                                     "<end_of_turn>",
                                     "<|endoftext|>",
                                     "</s>",
                                     "<|eom_id|>",
                                     "<EOT>",
                                     "_<EOT>",
                                     "[EOT]",
                                     "[EOS]",
                                     "<|end_of_text|>",
                                     "<end_of_utterance>",
                                     "<eos>",
                                     "<turn|>",
                                     "<|tool_response>",
                                     "<\xEF\xBD\x9C"
                                     "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                     "[e~["};

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB, else -1.
int ParseByteToken(std::string_view t) {
  if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
  const int hi = HexDigit(t[3]), lo = HexDigit(t[4]);
  return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  try {
    std::unique_ptr<Tokenizer> t(new Tokenizer());
    LLM_RETURN_IF_ERROR(t->Load(gguf));
    return t;
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory while loading the tokenizer");
  } catch (const std::exception& e) {
    return Errorf(LLM_ERR_INTERNAL, "tokenizer load: %s", e.what());
  }
}

absl::Status Tokenizer::Load(const GgufFile& gguf) {
  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> model,
                       gguf.GetString("tokenizer.ggml.model"));
  if (!model) return Error(LLM_ERR_BAD_MODEL, "tokenizer.ggml.model is missing");
  if (*model == "gpt2") {
    type_ = TokenizerType::kBpe;
  } else if (*model == "llama") {
    type_ = TokenizerType::kSpm;
  } else {
    return Errorf(LLM_ERR_UNSUPPORTED, "unsupported tokenizer.ggml.model '%s'",
                  std::string(*model));
  }
  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> pre, gguf.GetString("tokenizer.ggml.pre"));
  if (type_ == TokenizerType::kBpe) {
    // SentencePiece has no pre-tokenizer (llama.cpp ignores the key there).
    LLM_ASSIGN_OR_RETURN(const PreTokenizerSpec spec,
                         ParsePreTokenizer(pre.value_or(std::string_view())));
    pre_ = spec.type;
    ignore_merges_ = spec.ignore_merges;
    pre_add_bos_ = spec.add_bos;
  }

  LLM_ASSIGN_OR_RETURN(std::vector<std::string_view> tokens,
                       gguf.GetStringArray("tokenizer.ggml.tokens"));
  if (tokens.empty()) return Error(LLM_ERR_BAD_MODEL, "tokenizer.ggml.tokens is missing or empty");
  if (tokens.size() > static_cast<size_t>(kMaxVocab)) {
    return Errorf(LLM_ERR_BAD_MODEL, "tokenizer.ggml.tokens has %d entries, too many",
                  static_cast<long long>(tokens.size()));
  }
  const size_t n = tokens.size();

  LLM_ASSIGN_OR_RETURN(scores_, gguf.GetFloatArray("tokenizer.ggml.scores"));
  if (scores_.empty()) {
    if (type_ == TokenizerType::kSpm) {
      return Error(LLM_ERR_BAD_MODEL, "tokenizer.ggml.scores is missing (needed by SentencePiece)");
    }
    scores_.assign(n, 0.0f);
  } else if (scores_.size() != n) {
    return Errorf(LLM_ERR_BAD_MODEL, "tokenizer.ggml.scores has %d entries, tokens has %d",
                  static_cast<long long>(scores_.size()), static_cast<long long>(n));
  }

  LLM_ASSIGN_OR_RETURN(std::vector<int64_t> types, gguf.GetIntArray("tokenizer.ggml.token_type"));
  if (!types.empty() && types.size() != n) {
    return Errorf(LLM_ERR_BAD_MODEL, "tokenizer.ggml.token_type has %d entries, tokens has %d",
                  static_cast<long long>(types.size()), static_cast<long long>(n));
  }

  texts_.resize(n);
  attrs_.assign(n, kAttrNormal);
  ReserveEmpty(token_to_id_, n);  // core/oom_safe.h: no growth while inserting
  for (size_t i = 0; i < n; ++i) {
    if (tokens[i].empty()) {
      texts_[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp
    } else {
      texts_[i].assign(tokens[i].data(), tokens[i].size());
    }
    max_token_bytes_ = std::max(max_token_bytes_, texts_[i].size());
    std::string key = texts_[i];  // copied outside the table (core/oom_safe.h)
    if (!token_to_id_.emplace(std::move(key), static_cast<int32_t>(i)).second) {
      return Errorf(LLM_ERR_BAD_MODEL,
                    "tokenizer.ggml.tokens: duplicate token text at ids %d and %d",
                    token_to_id_[texts_[i]], static_cast<int>(i));
    }
    if (!types.empty()) {
      // GGUF token types: 0 undefined, 1 normal, 2 unknown, 3 control,
      // 4 user-defined, 5 unused, 6 byte.
      static constexpr uint8_t kTypeAttr[7] = {
          0, kAttrNormal, kAttrUnknown, kAttrControl, kAttrUserDefined, kAttrUnused, kAttrByte};
      if (types[i] < 0 || types[i] > 6) {
        return Errorf(LLM_ERR_BAD_MODEL, "tokenizer.ggml.token_type[%d] = %d is not a token type",
                      static_cast<int>(i), static_cast<long long>(types[i]));
      }
      attrs_[i] = kTypeAttr[types[i]];
    }
  }

  if (type_ == TokenizerType::kBpe) {
    LLM_ASSIGN_OR_RETURN(std::vector<std::string_view> merges,
                         gguf.GetStringArray("tokenizer.ggml.merges"));
    if (merges.empty())
      return Error(LLM_ERR_BAD_MODEL, "tokenizer.ggml.merges is missing (needed by gpt2 BPE)");
    LLM_ASSIGN_OR_RETURN(BpeMerges m,
                         BpeMerges::Build(&token_to_id_, static_cast<int32_t>(n), merges));
    merges_ = std::make_unique<BpeMerges>(std::move(m));
    add_space_prefix_ = false;
    add_bos_ = pre_add_bos_;
  } else {
    for (int b = 0; b < 256; ++b) {
      static const char kHex[] = "0123456789ABCDEF";
      const char buf[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      auto it = token_to_id_.find(absl::string_view(buf, 6));
      if (it == token_to_id_.end()) {
        const char c = static_cast<char>(b);
        it = token_to_id_.find(absl::string_view(&c, 1));
      }
      spm_byte_tokens_[b] = it != token_to_id_.end() ? it->second : -1;
    }
    spm_split_before_spaces_ = true;
    for (const std::string& t : texts_) {
      if (SpmHasInnerSpace(t)) {
        spm_split_before_spaces_ = false;
        break;
      }
    }
    add_space_prefix_ = true;
    add_bos_ = true;
    // SentencePiece conventions, used by llama.cpp when the keys are missing.
    bos_ = 1 < static_cast<int32_t>(n) ? 1 : -1;
    eos_ = 2 < static_cast<int32_t>(n) ? 2 : -1;
    unk_ = 0;
  }
  add_eos_ = false;

  LLM_ASSIGN_OR_RETURN(std::optional<bool> add_prefix,
                       gguf.GetBool("tokenizer.ggml.add_space_prefix"));
  if (add_prefix) add_space_prefix_ = *add_prefix;
  LLM_ASSIGN_OR_RETURN(std::optional<bool> add_bos, gguf.GetBool("tokenizer.ggml.add_bos_token"));
  if (add_bos) add_bos_ = *add_bos;
  LLM_ASSIGN_OR_RETURN(std::optional<bool> add_eos, gguf.GetBool("tokenizer.ggml.add_eos_token"));
  if (add_eos) add_eos_ = *add_eos;

  LLM_RETURN_IF_ERROR(LoadSpecialIds(gguf));
  if (add_bos_ && bos_ < 0) {
    return Error(LLM_ERR_BAD_MODEL,
                 "tokenizer.ggml.add_bos_token is true but there is no BOS token");
  }
  if (add_eos_ && eos_ < 0) {
    return Error(LLM_ERR_BAD_MODEL,
                 "tokenizer.ggml.add_eos_token is true but there is no EOS token");
  }

  LLM_ASSIGN_OR_RETURN(std::optional<std::string_view> name, gguf.GetString("general.name"));
  DetectSpecialTokens(name.value_or(std::string_view()));
  return absl::OkStatus();
}

absl::Status Tokenizer::LoadSpecialIds(const GgufFile& gguf) {
  const int64_t n = static_cast<int64_t>(texts_.size());
  struct Key {
    const char* key;
    int32_t* id;
  };
  const Key keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos_},
      {"tokenizer.ggml.eos_token_id", &eos_},
      {"tokenizer.ggml.unknown_token_id", &unk_},
      {"tokenizer.ggml.padding_token_id", &pad_},
      {"tokenizer.ggml.eot_token_id", &eot_},
      {"tokenizer.ggml.eom_token_id", &eom_},
      {"tokenizer.ggml.fim_pad_token_id", &fim_pad_},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep_},
      {"tokenizer.ggml.fim_sep_token_id", &fim_sep_},
  };
  for (const Key& k : keys) {
    LLM_ASSIGN_OR_RETURN(std::optional<int64_t> v, gguf.GetInt(k.key));
    if (!v) continue;
    if (*v < 0 || *v >= n) {
      return Errorf(LLM_ERR_BAD_MODEL, "%s = %d is outside the vocabulary (%d tokens)", k.key,
                    static_cast<long long>(*v), static_cast<long long>(n));
    }
    *k.id = static_cast<int32_t>(*v);
  }
  return absl::OkStatus();
}

void Tokenizer::DetectSpecialTokens(std::string_view model_name) {
  auto make_control = [&](int32_t id) { attrs_[id] |= kAttrControl; };
  // When the id is not in the metadata, take the first listed text present
  // and make it a control token. (llama.cpp takes the first it meets while
  // iterating a hash map, so with several candidates its choice is arbitrary.)
  auto detect = [&](int32_t* id, auto& texts) {
    for (const char* t : texts) {
      const int32_t found = TokenId(t);
      if (found < 0) continue;
      *id = found;
      make_control(found);
      return;
    }
  };
  if (eot_ < 0) detect(&eot_, kEotTexts);
  if (eom_ < 0) detect(&eom_, kEomTexts);
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1;
  detect(&fim_pre, kFimPreTexts);
  detect(&fim_suf, kFimSufTexts);
  detect(&fim_mid, kFimMidTexts);
  if (fim_pad_ < 0) detect(&fim_pad_, kFimPadTexts);
  if (fim_rep_ < 0) detect(&fim_rep_, kFimRepTexts);
  if (fim_sep_ < 0) detect(&fim_sep_, kFimSepTexts);

  eog_.assign(texts_.size(), 0);
  for (int32_t id : {fim_pad_, fim_rep_, fim_sep_, eos_, eot_, eom_}) {
    if (id >= 0) eog_[id] = 1;
  }
  for (const char* t : kEogTexts) {
    const int32_t id = TokenId(t);
    if (id < 0) continue;
    eog_[id] = 1;
    make_control(id);
  }

  // Texts matched before ordinary tokenization: longest first (ties by id,
  // where llama.cpp's unstable sort leaves the order unspecified).
  for (int32_t id = 0; id < n_vocab(); ++id) {
    if (attrs_[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown))
      special_tokens_.push_back(id);
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](int32_t a, int32_t b) { return texts_[a].size() > texts_[b].size(); });

  // Phi-3 models strip whitespace after their special tokens (llama.cpp
  // selects this by general.name).
  std::string name(model_name);
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : special_tokens_) attrs_[id] |= kAttrRstrip;
    for (const char* t : {"</s>"}) {
      const int32_t id = TokenId(t);
      if (id >= 0) attrs_[id] |= kAttrRstrip;
    }
    for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) {
      const int32_t id = TokenId(t);
      if (id >= 0) attrs_[id] &= static_cast<uint8_t>(~kAttrRstrip);
    }
  }
}

std::vector<Tokenizer::Fragment> Tokenizer::PartitionSpecial(std::string_view text,
                                                             bool parse_special) const {
  std::vector<Fragment> frags;
  if (text.empty()) return frags;
  frags.push_back(Fragment{-1, 0, text.size()});
  bool present[256] = {};
  for (char c : text) present[static_cast<uint8_t>(c)] = true;
  std::vector<Fragment> next;
  for (int32_t id : special_tokens_) {
    const uint8_t a = attrs_[id];
    if (!parse_special && (a & (kAttrControl | kAttrUnknown))) continue;
    const std::string& tok = texts_[id];
    if (tok.size() > text.size() || !present[static_cast<uint8_t>(tok[0])]) continue;
    next.clear();
    bool changed = false;
    for (const Fragment& f : frags) {
      if (f.token >= 0 || f.length < tok.size()) {
        next.push_back(f);
        continue;
      }
      size_t base = f.offset, len = f.length;
      while (true) {
        const size_t rel = text.substr(base, len).find(tok);
        if (rel == std::string_view::npos) {
          if (len > 0) next.push_back(Fragment{-1, base, len});
          break;
        }
        changed = true;
        const size_t match = base + rel;
        size_t left_len = rel;
        if (a & kAttrLstrip) {
          while (left_len > 0 && IsAsciiSpace(text[base + left_len - 1])) --left_len;
        }
        if (left_len > 0) next.push_back(Fragment{-1, base, left_len});
        next.push_back(Fragment{id, 0, 0});
        size_t right = match + tok.size();
        size_t right_len = base + len - right;
        if (a & kAttrRstrip) {
          while (right_len > 0 && IsAsciiSpace(text[right])) {
            ++right;
            --right_len;
          }
        }
        base = right;
        len = right_len;
        if (len == 0) break;
      }
    }
    if (changed) frags.swap(next);
  }
  return frags;
}

void Tokenizer::TokenizeBpe(std::string_view text, std::vector<int32_t>* out) const {
  // Decode leniently (invalid bytes -> U+FFFD), split into words, and merge
  // each word's re-encoded bytes.
  const std::vector<uint32_t> cpts = DecodeUtf8Lenient(text);
  const std::vector<size_t> words = PreTokenize(pre_, cpts);
  BpeMerges::Scratch scratch;
  std::string utf8, encoded;
  size_t pos = 0;
  for (size_t len : words) {
    utf8.clear();
    for (size_t i = pos; i < pos + len; ++i) AppendUtf8(cpts[i], &utf8);
    pos += len;
    if (ignore_merges_) {
      // The whole word, byte-encoded, may be a token: then it is emitted
      // without merging (llama.cpp's ignore_merges).
      encoded.clear();
      for (char c : utf8) encoded += ByteToUnicodeUtf8(static_cast<uint8_t>(c));
      const int32_t id = TokenId(encoded);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
    }
    merges_->EncodeWord(utf8, &scratch, out);
  }
}

void Tokenizer::TokenizeSpm(std::string_view text, std::vector<int32_t>* out) const {
  SpmVocab v;
  v.token_to_id = &token_to_id_;
  v.scores = &scores_;
  v.byte_tokens = spm_byte_tokens_;
  v.unk = unk_;
  v.max_token_bytes = max_token_bytes_;
  v.split_before_spaces = spm_split_before_spaces_;
  SpmEncode(v, text, out);
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Tokenize(std::string_view utf8, bool add_special,
                                                         bool parse_special) const {
  if (utf8.size() >= kMaxTextBytes) {
    return Errorf(LLM_ERR_INVALID_ARGUMENT, "text of %d bytes is too long to tokenize",
                  static_cast<long long>(utf8.size()));
  }
  try {
    std::vector<int32_t> out;
    out.reserve(utf8.size() / 3 + 4);
    const std::vector<Fragment> frags = PartitionSpecial(utf8, parse_special);
    if (add_special && add_bos_) out.push_back(bos_);
    if (type_ == TokenizerType::kBpe) {
      for (const Fragment& f : frags) {
        if (f.token >= 0) {
          out.push_back(f.token);
        } else {
          TokenizeBpe(utf8.substr(f.offset, f.length), &out);
        }
      }
    } else {
      // A space is prefixed to the text at the start and after each special
      // token (SentencePiece's dummy prefix, as llama.cpp applies it).
      bool prev_special = true;
      std::string escaped;
      for (const Fragment& f : frags) {
        if (f.token >= 0) {
          out.push_back(f.token);
          prev_special = true;
          continue;
        }
        escaped.clear();
        if (add_space_prefix_ && prev_special) escaped += kSpmSpace;
        for (char c : utf8.substr(f.offset, f.length)) {
          if (c == ' ') {
            escaped += kSpmSpace;
          } else {
            escaped.push_back(c);
          }
        }
        TokenizeSpm(escaped, &out);
        prev_special = false;
      }
    }
    if (add_special && add_eos_) out.push_back(eos_);
    return out;
  } catch (const std::bad_alloc&) {
    return Error(LLM_ERR_OUT_OF_MEMORY, "out of memory while tokenizing");
  }
}

std::string Tokenizer::TokenToPiece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return std::string();
  const uint8_t a = attrs_[id];
  if (!render_special && (a & (kAttrControl | kAttrUnknown))) return std::string();
  const std::string& text = texts_[id];
  if (a & (kAttrControl | kAttrUnknown | kAttrUserDefined)) return text;
  if (a & kAttrNormal) {
    std::string out;
    if (type_ == TokenizerType::kSpm) {
      out.reserve(text.size());
      for (size_t i = 0; i < text.size();) {
        if (text.compare(i, 3, kSpmSpace) == 0) {
          out.push_back(' ');
          i += 3;
        } else {
          out.push_back(text[i++]);
        }
      }
      return out;
    }
    // Byte-level BPE: map each stand-in codepoint back to its byte.
    for (uint32_t cp : DecodeUtf8Lenient(text)) {
      const int b = UnicodeToByte(cp);
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
      } else {
        // Not a byte stand-in: llama.cpp's marker for a malformed vocabulary.
        std::string utf8;
        AppendUtf8(cp, &utf8);
        out += "[UNK_BYTE_0x";
        for (char c : utf8) {
          static const char kHex[] = "0123456789abcdef";
          out.push_back(kHex[static_cast<uint8_t>(c) >> 4]);
          out.push_back(kHex[static_cast<uint8_t>(c) & 15]);
        }
        out += text + "]";
      }
    }
    return out;
  }
  if (a & kAttrByte) {
    const int b = ParseByteToken(text);
    return b >= 0 ? std::string(1, static_cast<char>(b)) : text;
  }
  return std::string();  // unused / undefined tokens
}

std::string Tokenizer::Detokenize(absl::Span<const int32_t> ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += TokenToPiece(id, render_special);
  return out;
}

bool Tokenizer::IsEog(int32_t id) const { return id >= 0 && id < n_vocab() && eog_[id] != 0; }

bool Tokenizer::IsControl(int32_t id) const {
  return id >= 0 && id < n_vocab() && (attrs_[id] & kAttrControl) != 0;
}

uint8_t Tokenizer::attr(int32_t id) const { return id >= 0 && id < n_vocab() ? attrs_[id] : 0; }

std::string_view Tokenizer::TokenText(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return std::string_view();
  return texts_[id];
}

int32_t Tokenizer::TokenId(std::string_view text) const {
  auto it = token_to_id_.find(AbslView(text));
  return it != token_to_id_.end() ? it->second : -1;
}

}  // namespace llm
