// Tokenizer round trip on arbitrary text: Tokenize -> Detokenize and the
// StreamingDetokenizer over the same ids.
//
// Input: byte 0 selects the vocabulary and flags, the rest is the text.
//   bits 0-1  vocabulary: 0 starcoder (byte-level BPE, the `starcoder` pre-
//             tokenizer family that SmolLM2's "smollm" belongs to),
//             1 llama-spm (SentencePiece), 2 gpt-2 (byte-level BPE, default
//             pre-tokenizer), 3 phi-3 (SentencePiece, other flags)
//   bit 2     add_special
//   bit 3     parse_special
//   bit 4     render_special (detokenizers)
// The vocabularies are llama.cpp's ggml-vocab-*.gguf from the directory in
// $LLM_VOCAB_DIR (scripts/fetch_vocabs.sh prints it; scripts/fuzz.sh sets
// it), loaded once.
//
// LLM_FUZZ_VERBOSE=1 prints the ids of each input.
//
// Invariants (abort = bug):
//  - every id is in [0, n_vocab);
//  - the streamed text is well-formed UTF-8 (the streaming detokenizer's
//    promise: callbacks only ever see valid UTF-8);
//  - if the plain detokenization is valid UTF-8, the stream equals it;
//  - byte-level BPE, parse_special off, valid UTF-8 input, render_special
//    off, every byte of the text has a byte token in the vocabulary:
//    Detokenize(Tokenize(text)) == text (BOS/EOS render as "").
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "format/gguf.h"
#include "fuzz/fuzz_util.h"
#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

const char* const kVocabs[4] = {"ggml-vocab-starcoder.gguf", "ggml-vocab-llama-spm.gguf",
                                "ggml-vocab-gpt-2.gguf", "ggml-vocab-phi-3.gguf"};

struct Vocab {
  std::unique_ptr<llm::GgufFile> gguf;  // kept alive with the tokenizer
  std::unique_ptr<llm::Tokenizer> tokenizer;
  // Byte-level BPE: whether byte b has a single-byte token. StarCoder's vocab
  // lacks 0xC0, 0xC1, 0xF1, 0xF5..0xFF; such bytes are dropped, as llama.cpp
  // drops them, so text containing them cannot round-trip.
  bool byte_token[256] = {};
};

// GPT-2's printable stand-in for byte b (bytes_to_unicode), as UTF-8.
std::string ByteStandIn(int b) {
  int cp;
  if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
    cp = b;
  } else {
    int n = 0;  // index among the remapped bytes, in byte order
    for (int x = 0; x < b; ++x) {
      if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++n;
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// The vocab GGUFs carry their original architectures (starcoder2, gpt2...), so
// the tokenizer is built directly rather than through Model (llama only).
Vocab LoadVocab(const char* file) {
  const char* dir = std::getenv("LLM_VOCAB_DIR");
  if (dir == nullptr || *dir == '\0') {
    std::fprintf(stderr,
                 "tokenizer_fuzzer: LLM_VOCAB_DIR is unset: run "
                 "`export LLM_VOCAB_DIR=$(scripts/fetch_vocabs.sh)`\n");
    std::abort();  // a setup error, not a finding
  }
  std::string path = std::string(dir) + "/" + file;
  Vocab v;
  auto gguf = llm::GgufFile::Open(path);
  if (gguf.ok()) {
    v.gguf = std::move(*gguf);
    auto tok = llm::Tokenizer::FromGguf(*v.gguf);
    if (tok.ok()) {
      v.tokenizer = std::move(*tok);
      for (int b = 0; b < 256; ++b) v.byte_token[b] = v.tokenizer->TokenId(ByteStandIn(b)) >= 0;
      return v;
    }
    std::fprintf(stderr, "tokenizer_fuzzer: %s: %s\n", path.c_str(),
                 std::string(tok.status().message()).c_str());
  } else {
    std::fprintf(stderr, "tokenizer_fuzzer: %s: %s\n", path.c_str(),
                 std::string(gguf.status().message()).c_str());
  }
  std::abort();  // a setup error, not a finding
}

struct Vocabs {
  Vocab v[4];
  Vocabs() {
    for (int i = 0; i < 4; ++i) v[i] = LoadVocab(kVocabs[i]);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Vocabs* vocabs = new Vocabs();  // leaked on purpose: lives for the process
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const int which = flags & 3;
  const bool add_special = flags & 4, parse_special = flags & 8, render_special = flags & 16;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Vocab& vocab = vocabs->v[which];
  const llm::Tokenizer& tok = *vocab.tokenizer;

  auto ids = tok.Tokenize(text, add_special, parse_special);
  if (!ids.ok()) {
    LLM_FUZZ_CHECK(!ids.status().message().empty());
    return 0;
  }
  for (int32_t id : *ids) LLM_FUZZ_CHECK(id >= 0 && id < tok.n_vocab());

  const std::string plain = tok.Detokenize(*ids, render_special);
  static const bool verbose = std::getenv("LLM_FUZZ_VERBOSE") != nullptr;
  if (verbose) {
    std::fprintf(stderr, "vocab %d add %d parse %d render %d ids:", which, add_special, parse_special,
                 render_special);
    for (int32_t id : *ids) {
      std::fprintf(stderr, " %d(attr %d '%s')", id, tok.attr(id), std::string(tok.TokenText(id)).c_str());
    }
    std::fprintf(stderr, "\n");
  }

  llm::StreamingDetokenizer stream(tok, render_special);
  std::string streamed;
  for (int32_t id : *ids) {
    std::string piece = stream.Push(id);
    LLM_FUZZ_CHECK(llm_fuzz::IsValidUtf8(piece));
    LLM_FUZZ_CHECK(stream.pending() <= 3);
    streamed += piece;
  }
  std::string tail = stream.Flush();
  LLM_FUZZ_CHECK(llm_fuzz::IsValidUtf8(tail));
  LLM_FUZZ_CHECK(stream.pending() == 0);
  streamed += tail;
  LLM_FUZZ_CHECK(llm_fuzz::IsValidUtf8(streamed));
  if (llm_fuzz::IsValidUtf8(plain)) LLM_FUZZ_CHECK(streamed == plain);

  if (tok.type() == llm::TokenizerType::kBpe && !parse_special && !render_special &&
      llm_fuzz::IsValidUtf8(text)) {
    bool representable = true;
    for (unsigned char c : text) representable = representable && vocab.byte_token[c];
    if (representable) LLM_FUZZ_CHECK(plain == text);
  }
  return 0;
}
