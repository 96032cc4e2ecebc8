// A model's identity for session save files (engine/session_state.h): a
// 64-bit hash that is the same for every load of the same model, in every
// process, on every platform and in every libllm version, so that a session
// saved on one machine is refused when loaded into a different model.
//
// It distinguishes MODELS, not files. It covers what decides the meaning of a
// saved KV cache and token history:
//   - general.architecture;
//   - every metadata key that starts with "<architecture>." (the
//     hyper-parameters: head counts, RoPE base and scaling, norm epsilon...),
//     sorted by key, with its type and value: the same weights run with
//     another RoPE base give other K rows;
//   - every tensor, in file order: name, GGUF type id, dims, byte size, and
//     the first and last min(256, size) bytes of its data (a fine-tune or
//     another quantization changes them; reading them touches a few pages per
//     tensor, never the whole file).
// It does not cover the rest of the metadata (general.name, tokenizer, chat
// template, ...), the alignment, or the order of metadata keys, so a file
// re-written with edited descriptions keeps its fingerprint. Two models that
// differ only inside their tensors' middle bytes would collide; real
// fine-tunes and quantizations change every tensor's first bytes.
//
// The algorithm is fixed (64-bit FNV-1a over a little-endian,
// length-prefixed encoding; see model_fingerprint.cpp) and must never change:
// saved sessions carry the value. std::hash / absl::Hash are seeded per
// process or may change between versions, so they are not used.
#pragma once

#include <cstdint>

namespace llm {

class GgufFile;  // format/gguf.h

uint64_t ModelFingerprint(const GgufFile& gguf);

}  // namespace llm
