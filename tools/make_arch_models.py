#!/usr/bin/env python3
"""Small random-weight GGUF models in the tensor layout and metadata of each
architecture family libllm runs besides plain llama (src/model/arch.h), for
the teacher-forced tests against llama.cpp (tools/gen_teacher_goldens.py).

Every model: vocabulary 512 (the tiny models' SentencePiece vocabulary,
tools/make_tiny_models.py, so llama-cpp-python can load it), F16 matrices,
F32 norms / biases / rope factors, weights scaled so that the logits have a
spread of a few units (clear top-1 margins exist). Per family:

  llama3        rope_freqs.weight (Llama 3 frequency factors), tied output
                (no output.weight), normal rope
  llama-linear  rope.scaling.type linear, factor 4, separate output.weight
  qwen2         Q/K/V biases, neox rope, tied output
  qwen3         per-head Q/K RMSNorm (attn_q_norm / attn_k_norm)
  phi3          fused attn_qkv and ffn_up (= gate | up), LongRoPE factors
                rope_factors_short / _long, rope.scaling.attn_factor,
                original context 4096 of 131072 (the short factors apply)
  gemma2        embedding scale, GeGLU, post-norms, attention and final
                soft-capping, key_length != n_embd / n_head, sliding window
                64 on every other layer
  gemma3        per-head Q/K norms, 6 layers (5 local : 1 global), local
                rope base 10000, global base 1e6 with linear scaling 8,
                window 64, no final soft-cap

Usage: python3 tools/make_arch_models.py OUT_DIR [--only NAME,...]
"""
import argparse
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_models import add_tiny_vocab  # noqa: E402

N_VOCAB = 512
SEED = 4321


class Shape:
    def __init__(self, n_embd=64, n_head=4, n_head_kv=2, head_dim=16, n_ff=64, n_layer=2,
                 n_ctx=2048):
        self.n_embd, self.n_head, self.n_head_kv = n_embd, n_head, n_head_kv
        self.head_dim, self.n_ff, self.n_layer, self.n_ctx = head_dim, n_ff, n_layer, n_ctx
        self.q_dim = n_head * head_dim
        self.kv_dim = n_head_kv * head_dim


MODELS = {
    "llama3": ("llama", Shape()),
    "llama-linear": ("llama", Shape()),
    "qwen2": ("qwen2", Shape()),
    "qwen3": ("qwen3", Shape()),
    "phi3": ("phi3", Shape(n_head_kv=4, n_ctx=131072)),
    "gemma2": ("gemma2", Shape(n_head=2, n_head_kv=1, head_dim=16)),
    "gemma3": ("gemma3", Shape(n_embd=32, n_head=4, n_head_kv=2, head_dim=16, n_ff=64, n_layer=6)),
}


def make_weights(name, arch, s, rng):
    """name -> float32 array in numpy (rows, cols) order (GGUF dims reversed)."""
    mat = lambda r, c: (rng.standard_normal((r, c)) / np.sqrt(c)).astype(np.float32)
    norm = lambda n: (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)
    vec = lambda n: (rng.standard_normal(n) * 0.1).astype(np.float32)
    w = {"token_embd.weight": (rng.standard_normal((N_VOCAB, s.n_embd)) * 0.3).astype(np.float32)}
    half = s.head_dim // 2
    if name == "llama3":
        w["rope_freqs.weight"] = rng.uniform(1.0, 8.0, half).astype(np.float32)
    if arch == "phi3":
        w["rope_factors_short.weight"] = rng.uniform(1.0, 2.0, half).astype(np.float32)
        w["rope_factors_long.weight"] = rng.uniform(2.0, 16.0, half).astype(np.float32)
    for i in range(s.n_layer):
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = norm(s.n_embd)
        if arch == "phi3":
            w[p + "attn_qkv.weight"] = mat(s.q_dim + 2 * s.kv_dim, s.n_embd)
        else:
            w[p + "attn_q.weight"] = mat(s.q_dim, s.n_embd)
            w[p + "attn_k.weight"] = mat(s.kv_dim, s.n_embd)
            w[p + "attn_v.weight"] = mat(s.kv_dim, s.n_embd)
        if arch == "qwen2":
            w[p + "attn_q.bias"] = vec(s.q_dim)
            w[p + "attn_k.bias"] = vec(s.kv_dim)
            w[p + "attn_v.bias"] = vec(s.kv_dim)
        if arch in ("qwen3", "gemma3"):
            w[p + "attn_q_norm.weight"] = norm(s.head_dim)
            w[p + "attn_k_norm.weight"] = norm(s.head_dim)
        w[p + "attn_output.weight"] = mat(s.n_embd, s.q_dim)
        if arch in ("gemma2", "gemma3"):
            w[p + "post_attention_norm.weight"] = norm(s.n_embd)
            w[p + "post_ffw_norm.weight"] = norm(s.n_embd)
        w[p + "ffn_norm.weight"] = norm(s.n_embd)
        if arch == "phi3":
            w[p + "ffn_up.weight"] = mat(2 * s.n_ff, s.n_embd)
        else:
            w[p + "ffn_gate.weight"] = mat(s.n_ff, s.n_embd)
            w[p + "ffn_up.weight"] = mat(s.n_ff, s.n_embd)
        w[p + "ffn_down.weight"] = mat(s.n_embd, s.n_ff)
    w["output_norm.weight"] = norm(s.n_embd)
    if name in ("llama-linear", "qwen3", "phi3"):
        w["output.weight"] = (rng.standard_normal((N_VOCAB, s.n_embd)) * 0.3).astype(np.float32)
    return w


def write_model(path, name):
    arch, s = MODELS[name]
    rng = np.random.default_rng([SEED, list(MODELS).index(name)])
    wr = gguf.GGUFWriter(path, arch)
    # llama.cpp gives vocabularies of models named "phi3"/"phi-3" Phi-3's
    # special-token attributes, which need "<|endoftext|>": not in this vocabulary.
    wr.add_name("tiny-fused-longrope" if arch == "phi3" else f"tiny-{name}")
    wr.add_context_length(s.n_ctx)
    wr.add_embedding_length(s.n_embd)
    wr.add_block_count(s.n_layer)
    wr.add_feed_forward_length(s.n_ff)
    wr.add_head_count(s.n_head)
    wr.add_head_count_kv(s.n_head_kv)
    if s.q_dim != s.n_embd:
        wr.add_key_length(s.head_dim)
        wr.add_value_length(s.head_dim)
    wr.add_rope_dimension_count(s.head_dim)
    wr.add_layer_norm_rms_eps(1e-6 if arch.startswith("gemma") else 1e-5)
    wr.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    if name == "llama3":
        wr.add_rope_freq_base(500000.0)
    elif name == "llama-linear":
        wr.add_rope_freq_base(10000.0)
        wr.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        wr.add_rope_scaling_factor(4.0)
    elif arch in ("qwen2", "qwen3"):
        wr.add_rope_freq_base(1000000.0)
    elif arch == "phi3":
        wr.add_rope_freq_base(10000.0)
        wr.add_rope_scaling_type(gguf.RopeScalingType.LONGROPE)
        wr.add_rope_scaling_orig_ctx_len(4096)
        scale = s.n_ctx / 4096
        wr.add_rope_scaling_attn_factors(float(np.sqrt(1 + np.log(scale) / np.log(4096))))
    elif arch == "gemma2":
        wr.add_rope_freq_base(10000.0)
        wr.add_attn_logit_softcapping(50.0)
        wr.add_final_logit_softcapping(30.0)
        wr.add_sliding_window(64)
    elif arch == "gemma3":
        wr.add_rope_freq_base(1000000.0)
        wr.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        wr.add_rope_scaling_factor(8.0)
        wr.add_sliding_window(64)
    add_tiny_vocab(wr, N_VOCAB)
    for tname, x in make_weights(name, arch, s, rng).items():
        if x.ndim == 1:
            wr.add_tensor(tname, x)
        else:
            wr.add_tensor(tname, x.astype(np.float16))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--only", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name in args.only.split(","):
        path = os.path.join(args.out_dir, f"tiny-{name}.gguf")
        write_model(path, name)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
