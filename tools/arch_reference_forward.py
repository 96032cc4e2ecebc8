#!/usr/bin/env python3
"""A float64 numpy forward pass of the architecture families libllm runs
(llama, qwen2, qwen3, phi3, gemma2, gemma3; src/model/arch.h), written from
the math (not from libllm's code), to cross-check libllm's logits on the
small models of tools/make_arch_models.py independently of llama.cpp.

It reads the GGUF with the `gguf` package (F16/F32 tensors only), runs one
prompt and compares the last position's logits with libllm's, read through
its C ABI (build/libllm.so by default).

Usage: python3 tools/arch_reference_forward.py [--lib build/libllm.so]
           tests/data/arch/tiny-gemma2.gguf ...
"""
import argparse
import ctypes

import gguf
import numpy as np


def load(path):
    r = gguf.GGUFReader(path)
    meta = {}
    for k, v in r.fields.items():
        try:
            meta[k] = v.contents()
        except Exception:  # noqa: BLE001 - fields without a simple value
            pass
    tensors = {}
    for t in r.tensors:
        shape = [int(d) for d in reversed(t.shape)] if len(t.shape) > 1 else [int(t.shape[0])]
        tensors[t.name] = np.array(t.data, dtype=np.float64).reshape(shape)
    return meta, tensors


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope(x, pos, n_heads, head_dim, base, neox, freq_scale=1.0, factors=None, attn_factor=1.0):
    """theta_i = freq_scale * pos * base^(-2i/d) / factor_i; cos, sin scaled."""
    x = x.reshape(len(pos), n_heads, head_dim).copy()
    half = head_dim // 2
    inv = base ** (-np.arange(half) * 2.0 / head_dim)
    if factors is not None:
        inv = inv / factors
    th = freq_scale * np.outer(pos, inv)[:, None, :]
    c, s = np.cos(th) * attn_factor, np.sin(th) * attn_factor
    if neox:
        a, b = x[..., :half].copy(), x[..., half:].copy()
        x[..., :half], x[..., half:] = a * c - b * s, a * s + b * c
    else:
        a, b = x[..., 0::2].copy(), x[..., 1::2].copy()
        x[..., 0::2], x[..., 1::2] = a * c - b * s, a * s + b * c
    return x.reshape(len(pos), n_heads * head_dim)


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def forward(path, ids):
    """Logits of the last position of ids."""
    meta, t = load(path)
    arch = meta["general.architecture"]
    g = lambda key, default=None: meta.get(f"{arch}.{key}", default)  # noqa: E731
    n_embd, n_layer = g("embedding_length"), g("block_count")
    n_head, n_kv = g("attention.head_count"), g("attention.head_count_kv")
    hd = g("attention.key_length", n_embd // n_head)
    eps, base = g("attention.layer_norm_rms_epsilon"), g("rope.freq_base", 10000.0)
    neox = arch != "llama"
    freq_scale = 1.0 / g("rope.scaling.factor", 1.0)
    attn_factor = g("rope.scaling.attn_factor", 1.0)
    factors = t.get("rope_freqs.weight", t.get("rope_factors_short.weight"))
    gemma = arch.startswith("gemma")
    pattern = {"gemma2": 2, "gemma3": 6}.get(arch, 0)
    window = g("attention.sliding_window", 4096 if arch == "gemma2" else 0)
    n = len(ids)
    pos = np.arange(n)
    x = t["token_embd.weight"][ids]
    if gemma:
        x = x * np.sqrt(np.float32(n_embd))
    for layer in range(n_layer):
        p = f"blk.{layer}."
        W = lambda k: t[p + k]  # noqa: E731
        local = (pattern and window and layer % pattern != pattern - 1) or (arch == "llama" and window)
        l_base, l_scale = base, freq_scale
        if local and arch == "gemma3":
            l_base, l_scale = g("rope.freq_base_swa", 10000.0), 1.0
        h = rms_norm(x, W("attn_norm.weight"), eps)
        if p + "attn_qkv.weight" in t:
            q, k, v = np.split(h @ W("attn_qkv.weight").T, [n_head * hd, (n_head + n_kv) * hd], axis=1)
        else:
            q, k, v = h @ W("attn_q.weight").T, h @ W("attn_k.weight").T, h @ W("attn_v.weight").T
        if p + "attn_q.bias" in t:
            q, k, v = q + W("attn_q.bias"), k + W("attn_k.bias"), v + W("attn_v.bias")
        if p + "attn_q_norm.weight" in t:
            q = rms_norm(q.reshape(n, n_head, hd), W("attn_q_norm.weight"), eps).reshape(n, -1)
            k = rms_norm(k.reshape(n, n_kv, hd), W("attn_k_norm.weight"), eps).reshape(n, -1)
        q = rope(q, pos, n_head, hd, l_base, neox, l_scale, factors, attn_factor)
        k = rope(k, pos, n_kv, hd, l_base, neox, l_scale, factors, attn_factor)
        q, k, v = q.reshape(n, n_head, hd), k.reshape(n, n_kv, hd), v.reshape(n, n_kv, hd)
        o = np.zeros((n, n_head, hd))
        mask = np.tril(np.ones((n, n), bool))
        if local:
            mask &= (pos[:, None] - pos[None, :]) < window
        for head in range(n_head):
            kv = head // (n_head // n_kv)
            s = q[:, head] @ k[:, kv].T / np.sqrt(hd)
            if arch == "gemma2":
                cap = g("attn_logit_softcapping", 50.0)
                s = cap * np.tanh(s / cap)
            s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(1, keepdims=True))
            o[:, head] = (s / s.sum(1, keepdims=True)) @ v[:, kv]
        o = o.reshape(n, -1) @ W("attn_output.weight").T
        if p + "post_attention_norm.weight" in t:
            o = rms_norm(o, W("post_attention_norm.weight"), eps)
        x = x + o
        h = rms_norm(x, W("ffn_norm.weight"), eps)
        if p + "ffn_gate.weight" in t:
            gate, up = h @ W("ffn_gate.weight").T, h @ W("ffn_up.weight").T
        else:  # Phi-3: ffn_up = [gate | up]
            gate, up = np.split(h @ W("ffn_up.weight").T, 2, axis=1)
        act = gelu_tanh(gate) if gemma else gate / (1 + np.exp(-gate))
        o = (act * up) @ W("ffn_down.weight").T
        if p + "post_ffw_norm.weight" in t:
            o = rms_norm(o, W("post_ffw_norm.weight"), eps)
        x = x + o
    out = t.get("output.weight", t["token_embd.weight"])
    logits = rms_norm(x[-1], t["output_norm.weight"], eps) @ out.T
    cap = g("final_logit_softcapping", 30.0 if arch == "gemma2" else 0.0)
    if cap:
        logits = cap * np.tanh(logits / cap)
    return logits


def libllm_logits(lib, path, ids):
    m, s = ctypes.c_void_p(), ctypes.c_void_p()
    if lib.llm_model_load(path.encode(), None, ctypes.byref(m)) != 0:
        raise SystemExit(f"{path}: {lib.llm_last_error().decode()}")
    if lib.llm_session_create(m, None, ctypes.byref(s)) != 0:
        raise SystemExit(lib.llm_last_error().decode())
    arr = (ctypes.c_int32 * len(ids))(*ids)
    if lib.llm_session_prefill(s, arr, len(ids)) != 0:
        raise SystemExit(lib.llm_last_error().decode())
    ptr, n = ctypes.POINTER(ctypes.c_float)(), ctypes.c_size_t()
    lib.llm_session_logits(s, ctypes.byref(ptr), ctypes.byref(n))
    out = np.ctypeslib.as_array(ptr, shape=(n.value,)).astype(np.float64)
    lib.llm_session_free(s)
    lib.llm_model_free(m)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--lib", default="build/libllm.so")
    ap.add_argument("--n-tokens", type=int, default=100, help="prompt: token ids 3 .. 3 + n - 1")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.llm_last_error.restype = ctypes.c_char_p
    ids = list(range(3, 3 + args.n_tokens))
    for path in args.models:
        ref, got = forward(path, ids), libllm_logits(lib, path, ids)
        d = np.abs(ref - got)
        print("%s: mean |diff| %.4f, max %.4f, top-1 %s, reference logit std %.2f"
              % (path, d.mean(), d.max(), "same" if ref.argmax() == got.argmax() else "DIFFERENT", ref.std()))


if __name__ == "__main__":
    main()
