// A minimal GGUF v3 writer for the ABI tests, and a tiny but complete llama
// model built with it (2 layers, n_embd 128, 2 heads of 64, 1 KV head, ffn
// 256, 269-token byte-level BPE vocab, chatml template, Q8_0 embeddings +
// Q4_1 matrices + F32 norms: the tensor types of SmolLM2-135M-Q4_1).
//
// Why in the test and not a committed file: the corruption tests patch
// individual header fields (counts, string lengths, n_dims, dims, offsets),
// so they need the byte offset of every field, which the writer records.
// The tests link only libllm.so, so this header uses only the standard
// library (no libllm internals, no GoogleTest).
#ifndef LLM_TESTS_ABI_GGUF_WRITER_H_
#define LLM_TESTS_ABI_GGUF_WRITER_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace llm_abi_test {

// GGUF metadata value types.
enum : uint32_t {
  kGgufU8 = 0, kGgufI8 = 1, kGgufU16 = 2, kGgufI16 = 3, kGgufU32 = 4, kGgufI32 = 5,
  kGgufF32 = 6, kGgufBool = 7, kGgufString = 8, kGgufArray = 9, kGgufU64 = 10,
  kGgufI64 = 11, kGgufF64 = 12,
};
// GGML tensor type ids used here.
enum : uint32_t { kGgmlF32 = 0, kGgmlQ4_1 = 3, kGgmlQ8_0 = 8 };

// Byte offsets (from the start of the file) of one tensor-info record.
struct TensorInfoOffsets {
  std::string name;
  size_t name_len = 0;  // u64 length of the name string
  size_t n_dims = 0;    // u32
  size_t dims = 0;      // u64[n_dims]
  size_t type = 0;      // u32 ggml type
  size_t offset = 0;    // u64 data offset relative to the data section
};

struct GgufImage {
  std::vector<uint8_t> bytes;
  // Header fields: magic at 0, version (u32) at 4, tensor count (u64) at 8,
  // kv count (u64) at 16, first key's string length (u64) at 24.
  std::map<std::string, size_t> kv_type_offset;   // key -> u32 value type
  std::map<std::string, size_t> kv_value_offset;  // key -> value (arrays: elem type u32, count u64)
  std::vector<TensorInfoOffsets> tensors;
  size_t data_start = 0;  // first byte of the (aligned) tensor data section

  void PatchU32(size_t at, uint32_t v) { std::memcpy(bytes.data() + at, &v, 4); }
  void PatchU64(size_t at, uint64_t v) { std::memcpy(bytes.data() + at, &v, 8); }
  const TensorInfoOffsets *Tensor(const std::string &name) const {
    for (const auto &t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
};

class GgufWriter {
 public:
  void U32(const std::string &k, uint32_t v) { Scalar(k, kGgufU32, &v, 4); }
  void F32(const std::string &k, float v) { Scalar(k, kGgufF32, &v, 4); }
  void Bool(const std::string &k, bool v) {
    uint8_t b = v ? 1 : 0;
    Scalar(k, kGgufBool, &b, 1);
  }
  void Str(const std::string &k, const std::string &v) {
    Kv kv{k, kGgufString, {}};
    PutStr(&kv.value, v);
    kvs_.push_back(std::move(kv));
  }
  void StrArray(const std::string &k, const std::vector<std::string> &v) {
    Kv kv{k, kGgufArray, {}};
    PutU32(&kv.value, kGgufString);
    PutU64(&kv.value, v.size());
    for (const auto &s : v) PutStr(&kv.value, s);
    kvs_.push_back(std::move(kv));
  }
  void I32Array(const std::string &k, const std::vector<int32_t> &v) {
    Kv kv{k, kGgufArray, {}};
    PutU32(&kv.value, kGgufI32);
    PutU64(&kv.value, v.size());
    for (int32_t x : v) Put(&kv.value, &x, 4);
    kvs_.push_back(std::move(kv));
  }
  // dims[0] is the contiguous row length, as in GGUF.
  void Tensor(const std::string &name, uint32_t type, std::vector<uint64_t> dims,
              std::vector<uint8_t> data) {
    tensors_.push_back({name, type, std::move(dims), std::move(data)});
  }

  // Serialise. The last tensor ends exactly at the end of the file, so any
  // truncation cuts real data.
  GgufImage Build(uint64_t alignment = 32) const {
    GgufImage img;
    std::vector<uint8_t> &b = img.bytes;
    Put(&b, "GGUF", 4);
    PutU32(&b, 3);
    PutU64(&b, tensors_.size());
    PutU64(&b, kvs_.size());
    for (const Kv &kv : kvs_) {
      PutStr(&b, kv.key);
      img.kv_type_offset[kv.key] = b.size();
      PutU32(&b, kv.type);
      img.kv_value_offset[kv.key] = b.size();
      b.insert(b.end(), kv.value.begin(), kv.value.end());
    }
    uint64_t rel = 0;
    std::vector<uint64_t> rel_offsets;
    for (const T &t : tensors_) {
      TensorInfoOffsets o;
      o.name = t.name;
      o.name_len = b.size();
      PutStr(&b, t.name);
      o.n_dims = b.size();
      PutU32(&b, static_cast<uint32_t>(t.dims.size()));
      o.dims = b.size();
      for (uint64_t d : t.dims) PutU64(&b, d);
      o.type = b.size();
      PutU32(&b, t.type);
      o.offset = b.size();
      rel = (rel + alignment - 1) / alignment * alignment;
      rel_offsets.push_back(rel);
      PutU64(&b, rel);
      rel += t.data.size();
      img.tensors.push_back(o);
    }
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    img.data_start = b.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      b.resize(img.data_start + rel_offsets[i], 0);
      b.insert(b.end(), tensors_[i].data.begin(), tensors_[i].data.end());
    }
    return img;
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::vector<uint8_t> value;
  };
  struct T {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> data;
  };
  static void Put(std::vector<uint8_t> *b, const void *p, size_t n) {
    const uint8_t *c = static_cast<const uint8_t *>(p);
    b->insert(b->end(), c, c + n);
  }
  static void PutU32(std::vector<uint8_t> *b, uint32_t v) { Put(b, &v, 4); }
  static void PutU64(std::vector<uint8_t> *b, uint64_t v) { Put(b, &v, 8); }
  static void PutStr(std::vector<uint8_t> *b, const std::string &s) {
    PutU64(b, s.size());
    Put(b, s.data(), s.size());
  }
  void Scalar(const std::string &k, uint32_t type, const void *v, size_t n) {
    Kv kv{k, type, {}};
    Put(&kv.value, v, n);
    kvs_.push_back(std::move(kv));
  }
  std::vector<Kv> kvs_;
  std::vector<T> tensors_;
};

// ---- the tiny llama model ------------------------------------------------

// Knobs to build broken-but-well-formed variants.
struct TinyModelOptions {
  std::string architecture = "llama";
  bool with_chat_template = true;
  std::string chat_template;     // "" = TinyChatTemplate() (ChatML)
  std::string drop_tensor;       // omit this tensor
  std::string bad_shape_tensor;  // give this tensor a wrong first dim (n_embd/2)
  std::string extra_tensor;      // add this F32 vector of n_embd elements
  std::string rope_scaling_type;  // write <arch>.rope.scaling.type when not empty
};

struct TinyVocab {
  static constexpr int32_t kEndOfText = 0;  // <|endoftext|>
  static constexpr int32_t kImStart = 1;    // <|im_start|> (BOS)
  static constexpr int32_t kImEnd = 2;      // <|im_end|> (EOS)
  static constexpr int32_t kFirstByte = 3;  // 256 byte tokens follow
  // Merged tokens, in merge-rank order (ids 259..268).
  static const std::vector<std::pair<std::string, std::string>> &Merges() {
    static const std::vector<std::pair<std::string, std::string>> m = {
        {"\xC4\xA0", "t"}, {"h", "e"},   {"l", "l"},           {"he", "ll"},
        {"hell", "o"},     {"\xC4\xA0", "w"}, {"o", "r"},     {"\xC4\xA0w", "or"},
        {"l", "d"},        {"\xC4\xA0wor", "ld"}};
    return m;
  }
  static constexpr int32_t kHello = 3 + 256 + 4;       // "hello"
  static constexpr int32_t kSpaceWorld = 3 + 256 + 9;  // "Ġworld"
  static constexpr int32_t kVocab = 3 + 256 + 10;      // 269
};

constexpr int kTinyEmbd = 128, kTinyLayers = 2, kTinyHeads = 2, kTinyHeadsKv = 1,
              kTinyHeadDim = 64, kTinyFfn = 256, kTinyCtxTrain = 256;

// GPT-2 byte-to-unicode map: byte b -> UTF-8 text of its vocab symbol.
inline std::string Gpt2ByteSymbol(int b) {
  uint32_t cp;
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
    cp = static_cast<uint32_t>(b);
  } else {
    // The remaining bytes map to 256, 257, ... in increasing byte order.
    int n = 0;
    for (int x = 0; x < b; ++x)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) ++n;
    cp = 256 + static_cast<uint32_t>(n);
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// IEEE half bits of a normal float (enough for the scales used here).
inline uint16_t TinyF32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = (x >> 13) & 0x3FFu;
  if (exp <= 0) return static_cast<uint16_t>(sign);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | mant);
}

// Random quantized rows: rows x cols elements, cols a multiple of 32.
inline std::vector<uint8_t> TinyQ8_0(uint64_t cols, uint64_t rows, std::mt19937 *rng) {
  std::vector<uint8_t> out;
  std::uniform_int_distribution<int> q(-127, 127);
  uint16_t d = TinyF32ToF16(1.0f / 256.0f);
  for (uint64_t blk = 0; blk < rows * cols / 32; ++blk) {
    out.push_back(static_cast<uint8_t>(d & 0xFF));
    out.push_back(static_cast<uint8_t>(d >> 8));
    for (int i = 0; i < 32; ++i) out.push_back(static_cast<uint8_t>(static_cast<int8_t>(q(*rng))));
  }
  return out;
}
inline std::vector<uint8_t> TinyQ4_1(uint64_t cols, uint64_t rows, std::mt19937 *rng) {
  std::vector<uint8_t> out;
  std::uniform_int_distribution<int> q(0, 255);
  uint16_t d = TinyF32ToF16(1.0f / 64.0f), m = TinyF32ToF16(-7.5f / 64.0f);
  for (uint64_t blk = 0; blk < rows * cols / 32; ++blk) {
    out.push_back(static_cast<uint8_t>(d & 0xFF));
    out.push_back(static_cast<uint8_t>(d >> 8));
    out.push_back(static_cast<uint8_t>(m & 0xFF));
    out.push_back(static_cast<uint8_t>(m >> 8));
    for (int i = 0; i < 16; ++i) out.push_back(static_cast<uint8_t>(q(*rng)));
  }
  return out;
}
inline std::vector<uint8_t> TinyF32(uint64_t n, std::mt19937 *rng) {
  std::vector<uint8_t> out(n * 4);
  std::uniform_real_distribution<float> u(0.8f, 1.2f);
  for (uint64_t i = 0; i < n; ++i) {
    float v = u(*rng);
    std::memcpy(out.data() + 4 * i, &v, 4);
  }
  return out;
}

inline const char *TinyChatTemplate() {
  return "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
         "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt "
         "%}{{ '<|im_start|>assistant\\n' }}{% endif %}";
}

inline GgufImage BuildTinyModel(const TinyModelOptions &opt = TinyModelOptions()) {
  GgufWriter w;
  const std::string &a = opt.architecture;
  w.Str("general.architecture", a);
  w.Str("general.name", "tiny-abi-test");
  w.U32("general.alignment", 32);
  w.U32(a + ".context_length", kTinyCtxTrain);
  w.U32(a + ".embedding_length", kTinyEmbd);
  w.U32(a + ".block_count", kTinyLayers);
  w.U32(a + ".feed_forward_length", kTinyFfn);
  w.U32(a + ".attention.head_count", kTinyHeads);
  w.U32(a + ".attention.head_count_kv", kTinyHeadsKv);
  w.F32(a + ".rope.freq_base", 10000.0f);
  w.F32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  w.U32(a + ".rope.dimension_count", kTinyHeadDim);
  w.U32(a + ".vocab_size", TinyVocab::kVocab);
  if (!opt.rope_scaling_type.empty()) w.Str(a + ".rope.scaling.type", opt.rope_scaling_type);
  w.Str("tokenizer.ggml.model", "gpt2");
  w.Str("tokenizer.ggml.pre", "smollm");
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};  // control
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(Gpt2ByteSymbol(b));
    types.push_back(1);  // normal
  }
  std::vector<std::string> merges;
  for (const auto &m : TinyVocab::Merges()) {
    merges.push_back(m.first + " " + m.second);
    tokens.push_back(m.first + m.second);
    types.push_back(1);
  }
  w.StrArray("tokenizer.ggml.tokens", tokens);
  w.I32Array("tokenizer.ggml.token_type", types);
  w.StrArray("tokenizer.ggml.merges", merges);
  w.U32("tokenizer.ggml.bos_token_id", TinyVocab::kImStart);
  w.U32("tokenizer.ggml.eos_token_id", TinyVocab::kImEnd);
  w.U32("tokenizer.ggml.unknown_token_id", TinyVocab::kEndOfText);
  w.U32("tokenizer.ggml.padding_token_id", TinyVocab::kImEnd);
  w.Bool("tokenizer.ggml.add_bos_token", false);
  w.Bool("tokenizer.ggml.add_space_prefix", false);
  if (opt.with_chat_template) {
    w.Str("tokenizer.chat_template",
          opt.chat_template.empty() ? std::string(TinyChatTemplate()) : opt.chat_template);
  }

  std::mt19937 rng(20261130);
  auto add = [&](const std::string &name, uint32_t type, uint64_t cols, uint64_t rows) {
    if (name == opt.drop_tensor) return;
    if (name == opt.bad_shape_tensor) cols /= 2;
    std::vector<uint64_t> dims = rows ? std::vector<uint64_t>{cols, rows} : std::vector<uint64_t>{cols};
    uint64_t r = rows ? rows : 1;
    std::vector<uint8_t> data = type == kGgmlQ8_0   ? TinyQ8_0(cols, r, &rng)
                                : type == kGgmlQ4_1 ? TinyQ4_1(cols, r, &rng)
                                                    : TinyF32(cols * r, &rng);
    w.Tensor(name, type, dims, std::move(data));
  };
  const uint64_t E = kTinyEmbd, KV = kTinyHeadsKv * kTinyHeadDim, F = kTinyFfn;
  add("token_embd.weight", kGgmlQ8_0, E, TinyVocab::kVocab);  // [n_embd, n_vocab], tied output
  add("output_norm.weight", kGgmlF32, E, 0);
  for (int l = 0; l < kTinyLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    add(p + "attn_norm.weight", kGgmlF32, E, 0);
    add(p + "attn_q.weight", kGgmlQ4_1, E, E);
    add(p + "attn_k.weight", kGgmlQ4_1, E, KV);
    add(p + "attn_v.weight", kGgmlQ4_1, E, KV);
    add(p + "attn_output.weight", kGgmlQ4_1, E, E);
    add(p + "ffn_norm.weight", kGgmlF32, E, 0);
    add(p + "ffn_gate.weight", kGgmlQ4_1, E, F);
    add(p + "ffn_up.weight", kGgmlQ4_1, E, F);
    add(p + "ffn_down.weight", kGgmlQ4_1, F, E);
  }
  if (!opt.extra_tensor.empty()) add(opt.extra_tensor, kGgmlF32, E, 0);
  return w.Build();
}

}  // namespace llm_abi_test

#endif  // LLM_TESTS_ABI_GGUF_WRITER_H_
