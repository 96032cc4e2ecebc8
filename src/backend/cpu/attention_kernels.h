// Private to backend/cpu: the per-ISA inner loop of Attention (attention.cpp
// validates, splits (query, head) pairs over threads and dispatches).
#pragma once

#include <cstdint>

#include "backend/cpu/attention.h"

namespace llm {
namespace attn {

// One (query, head): out[head_dim] = softmax(q . K^T * scale) V over kv
// positions 0 .. n_kv-1 of kv head g. scores: n_kv floats of scratch.
// The arithmetic is a fixed sequence given (n_kv, head_dim, level).
using AttendFn = void (*)(const float* qh, int64_t n_kv, int64_t g, const KvView& kv, float scale,
                          float* scores, float* acc, float* out);

AttendFn ScalarAttend();
AttendFn Avx2Attend();  // AVX2 + FMA + F16C
// AVX-512, head_dim % 16 == 0 only: llama.cpp's (ggml-cpu, llamafile) CPU
// attention bit for bit (see attention_avx512.cpp).
AttendFn Avx512Attend();
// AVX-512, head_dim % 64 == 0, for a step of ONE query token: ggml's
// vec_dot order (llama.cpp uses a different kernel for one-token batches).
AttendFn Avx512AttendOneToken();

}  // namespace attn
}  // namespace llm
