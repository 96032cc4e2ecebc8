#!/usr/bin/env python3
"""Generate tiny Llama-shaped GGUF models for teacher-forced tests.

Shape: arch "llama", n_embd 256, n_ff 512, 2 layers, 4 heads, 2 KV heads
(GQA), head_dim 64, vocab 512, context 256, rope freq_base 10000, rms eps
1e-5, separate output.weight. SentencePiece-style "llama" tokenizer metadata:
"<unk>" (0), "<s>" (1, bos), "</s>" (2, eos), 256 byte tokens "<0x00>".."<0xFF>",
then distinct pieces ("▁a", "a", "▁ab", ...) with scores and token types.

Weights are random and deterministic (the same float weights for every
file): matrices ~ N(0, 0.02), norms 1 + N(0, 0.05). One file per weight type;
every 2-D matrix (token_embd and output included) is stored in that type and
norms in F32:
  tiny-llama-{F16,BF16,Q8_0,Q4_0,Q4_K,Q6_K}.gguf

Q8_0/Q4_0/BF16 use gguf.quants.quantize. gguf-py has no K-quant quantizer, so
Q4_K/Q6_K are encoded here (simple per-sub-block min/max scales, exactly the
GGML block layout); the check at the end dequantizes every matrix with
gguf.quants.dequantize and bounds the error. Any valid encoding serves: the
tests compare libllm and llama.cpp on the same file.

Usage: python3 tools/make_tiny_models.py OUT_DIR [--check-llama-cpp]
  --check-llama-cpp  load each file with llama-cpp-python and eval a few tokens
"""
import argparse
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

N_EMBD = 256
N_FF = 512
N_LAYER = 2
N_HEAD = 4
N_HEAD_KV = 2
HEAD_DIM = N_EMBD // N_HEAD  # 64
N_VOCAB = 512
N_CTX = 256
ROPE_BASE = 10000.0
RMS_EPS = 1e-5
SEED = 1234

TYPES = {
    "F16": (Q.F16, gguf.LlamaFileType.MOSTLY_F16),
    "BF16": (Q.BF16, gguf.LlamaFileType.MOSTLY_BF16),
    "Q8_0": (Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "Q4_0": (Q.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0),
    "Q4_K": (Q.Q4_K, gguf.LlamaFileType.MOSTLY_Q4_K_M),
    "Q6_K": (Q.Q6_K, gguf.LlamaFileType.MOSTLY_Q6_K),
}

QK_K = 256


def round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_q4_k(x):
    """x: (rows, n) float32, n % 256 == 0 -> (rows, n/256*144) uint8.

    Element = d*sc[s]*q - dmin*m[s] with 6-bit sc, m per 32-element sub-block s.
    """
    rows, n = x.shape
    blocks = x.reshape(-1, 8, 32).astype(np.float32)  # (nb, sub-block, 32)
    nb = blocks.shape[0]
    mn = np.minimum(blocks.min(axis=-1), 0.0)  # (nb, 8), <= 0
    mx = blocks.max(axis=-1)
    scale = (mx - mn) / 15.0  # per sub-block step
    mins = -mn  # >= 0
    d = (scale.max(axis=-1) / 63.0).astype(np.float16)  # (nb,)
    dmin = (mins.max(axis=-1) / 63.0).astype(np.float16)
    d32 = d.astype(np.float32)[:, None]
    dmin32 = dmin.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.clip(round_half_away(scale / d32), 0, 63), 0).astype(np.uint8)
        m = np.where(dmin32 > 0, np.clip(round_half_away(mins / dmin32), 0, 63), 0).astype(np.uint8)
        step = (d32 * sc.astype(np.float32))[:, :, None]
        off = (dmin32 * m.astype(np.float32))[:, :, None]
        q = np.where(step > 0, np.clip(round_half_away((blocks + off) / step), 0, 15), 0).astype(np.uint8)
    # Pack scales (inverse of gguf.quants.Q4_K.get_scale_min).
    packed = np.zeros((nb, 12), dtype=np.uint8)
    packed[:, 0:4] = (sc[:, 0:4] & 0x3F) | ((sc[:, 4:8] >> 4) << 6)
    packed[:, 4:8] = (m[:, 0:4] & 0x3F) | ((m[:, 4:8] >> 4) << 6)
    packed[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((m[:, 4:8] & 0x0F) << 4)
    # qs: chunk c (64 elements) = sub-blocks 2c (low nibble) and 2c+1 (high nibble).
    q = q.reshape(nb, 4, 2, 32)
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(nb, 128)
    out = np.concatenate([d.view(np.uint8).reshape(nb, 2), dmin.view(np.uint8).reshape(nb, 2), packed, qs], axis=1)
    return out.reshape(rows, n // QK_K * 144)


def quantize_q6_k(x):
    """x: (rows, n) float32, n % 256 == 0 -> (rows, n/256*210) uint8.

    Element = d*sc[s]*(q-32), int8 sc per 16-element sub-block s, q in 0..63.
    """
    rows, n = x.shape
    blocks = x.reshape(-1, 16, 16).astype(np.float32)
    nb = blocks.shape[0]
    amax_idx = np.abs(blocks).argmax(axis=-1)[..., None]
    vmax = np.take_along_axis(blocks, amax_idx, axis=-1)[..., 0]  # signed max-magnitude
    scale = vmax / -32.0  # so vmax maps to q = -32
    d = (np.abs(scale).max(axis=-1) / 127.0).astype(np.float16)  # (nb,)
    d32 = d.astype(np.float32)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(d32 > 0, np.clip(round_half_away(scale / d32), -128, 127), 0).astype(np.int8)
        step = (d32 * sc.astype(np.float32))[:, :, None]
        q = np.where(step != 0, np.clip(round_half_away(blocks / step), -32, 31), 0).astype(np.int32) + 32
    q = q.reshape(nb, 256).astype(np.uint8)
    # Layout (see quant_blocks.h BlockQ6_K): half h, l < 32:
    # y[l] <- ql[l] low | qh[l] bits 0-1; y[l+32] <- ql[l+32] low | qh bits 2-3;
    # y[l+64] <- ql[l] high | qh bits 4-5; y[l+96] <- ql[l+32] high | qh bits 6-7.
    ql = np.zeros((nb, 128), dtype=np.uint8)
    qh = np.zeros((nb, 64), dtype=np.uint8)
    for h in range(2):
        y = q[:, 128 * h:128 * (h + 1)]
        a, b, c, e = y[:, 0:32], y[:, 32:64], y[:, 64:96], y[:, 96:128]
        ql[:, 64 * h:64 * h + 32] = (a & 0xF) | ((c & 0xF) << 4)
        ql[:, 64 * h + 32:64 * h + 64] = (b & 0xF) | ((e & 0xF) << 4)
        qh[:, 32 * h:32 * h + 32] = (a >> 4) | ((b >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6)
    out = np.concatenate([ql, qh, sc.view(np.uint8), d.view(np.uint8).reshape(nb, 2)], axis=1)
    return out.reshape(rows, n // QK_K * 210)


def encode(x, qtype):
    """Return (array, raw_dtype) for GGUFWriter.add_tensor."""
    if qtype == Q.F16:
        return x.astype(np.float16), None
    if qtype == Q.Q4_K:
        return quantize_q4_k(x), qtype
    if qtype == Q.Q6_K:
        return quantize_q6_k(x), qtype
    return quants.quantize(x, qtype), qtype


def vocab(n_vocab=N_VOCAB):
    """A llama (SentencePiece) vocabulary of n_vocab pieces: <unk>, <s>, </s>,
    the 256 byte tokens, then letter pieces of growing length (with and
    without the word-start mark). Also used by tools/make_random_llama.py."""
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    letters = "abcdefghijklmnopqrstuvwxyz"

    def pieces():
        yield "▁"
        for c in letters:
            yield "▁" + c
        yield from letters
        for a in letters:
            for b in letters:
                yield "▁" + a + b
                yield a + b
        for a in letters:
            for b in letters:
                for c in letters:
                    yield "▁" + a + b + c
                    yield a + b + c
        # Four-letter pieces only reach vocabularies above 36,816 (the 3B
        # shape of tools/make_random_llama.py); smaller ones are unchanged.
        for a in letters:
            for b in letters:
                for c in letters:
                    for d in letters:
                        yield "▁" + a + b + c + d
                        yield a + b + c + d

    seen = set(tokens)
    for p in pieces():
        if len(tokens) == n_vocab:
            break
        if p not in seen:
            seen.add(p)
            tokens.append(p)
            types.append(gguf.TokenType.NORMAL)
    assert len(tokens) == n_vocab and len(set(tokens)) == n_vocab
    scores = [0.0] * 259 + [-float(i) for i in range(n_vocab - 259)]
    return tokens, scores, [int(t) for t in types]


def add_tiny_vocab(wr, n_vocab=N_VOCAB):
    """Writes vocab(n_vocab) as a SentencePiece ("llama") tokenizer with
    <unk> = 0, <s> = 1, </s> = 2 and a BOS added (every generated model
    uses this block, so their metadata stays identical)."""
    tokens, scores, types = vocab(n_vocab)
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_unk_token_id(0)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(False)


def weights():
    """name -> float32 array in numpy (rows, cols) order; GGUF dims are reversed."""
    rng = np.random.default_rng(SEED)
    mat = lambda r, c: (rng.standard_normal((r, c)) * 0.02).astype(np.float32)
    norm = lambda n: (1.0 + rng.standard_normal(n) * 0.05).astype(np.float32)
    w = {"token_embd.weight": mat(N_VOCAB, N_EMBD)}
    kv_dim = N_HEAD_KV * HEAD_DIM
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = norm(N_EMBD)
        w[p + "attn_q.weight"] = mat(N_EMBD, N_EMBD)
        w[p + "attn_k.weight"] = mat(kv_dim, N_EMBD)
        w[p + "attn_v.weight"] = mat(kv_dim, N_EMBD)
        w[p + "attn_output.weight"] = mat(N_EMBD, N_EMBD)
        w[p + "ffn_norm.weight"] = norm(N_EMBD)
        w[p + "ffn_gate.weight"] = mat(N_FF, N_EMBD)
        w[p + "ffn_up.weight"] = mat(N_FF, N_EMBD)
        w[p + "ffn_down.weight"] = mat(N_EMBD, N_FF)
    w["output_norm.weight"] = norm(N_EMBD)
    w["output.weight"] = mat(N_VOCAB, N_EMBD)
    return w


def write_model(path, type_name):
    qtype, ftype = TYPES[type_name]
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_name(f"tiny-llama-{type_name}")
    wr.add_context_length(N_CTX)
    wr.add_embedding_length(N_EMBD)
    wr.add_block_count(N_LAYER)
    wr.add_feed_forward_length(N_FF)
    wr.add_head_count(N_HEAD)
    wr.add_head_count_kv(N_HEAD_KV)
    wr.add_rope_dimension_count(HEAD_DIM)
    wr.add_rope_freq_base(ROPE_BASE)
    wr.add_layer_norm_rms_eps(RMS_EPS)
    wr.add_vocab_size(N_VOCAB)
    wr.add_file_type(int(ftype))
    add_tiny_vocab(wr)
    max_err = 0.0
    for name, x in weights().items():
        if x.ndim == 1:
            wr.add_tensor(name, x)
            continue
        arr, raw = encode(x, qtype)
        wr.add_tensor(name, arr, raw_dtype=raw)
        # Round-trip check with the gguf package's dequantizer.
        back = quants.dequantize(arr if raw is not None else arr, qtype if raw is not None else Q.F16)
        back = np.asarray(back, dtype=np.float32).reshape(x.shape)
        max_err = max(max_err, float(np.abs(back - x).max()))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    # Weights have |x| up to ~0.1; 4-bit steps are ~0.2/15.
    limit = {"F16": 1e-4, "BF16": 1e-3, "Q8_0": 2e-3, "Q6_K": 6e-3, "Q4_0": 2.5e-2, "Q4_K": 2.5e-2}[type_name]
    if not max_err <= limit:
        raise SystemExit(f"{path}: round-trip error {max_err} exceeds {limit}")
    return max_err


def check_llama_cpp(path):
    import llama_cpp
    import llama_cpp.llama
    # ggml's "extra buffer types" repack quantized weights for AMX, which dies
    # with SIGILL on hosts that list AMX but do not grant it (VMs). Llama()
    # has no switch, so the default model params are patched (same as
    # tools/gen_teacher_goldens.py).
    orig = llama_cpp.llama_model_default_params

    def params_without_extra_bufts():
        params = orig()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    llama_cpp.llama.llama_cpp.llama_model_default_params = params_without_extra_bufts
    llm = llama_cpp.Llama(model_path=path, logits_all=True, verbose=False, n_ctx=64, seed=0)
    toks = [1, 300, 301, 302, 400, 511]
    llm.eval(toks)
    logits = np.array(llm.scores[: len(toks)], dtype=np.float32)
    assert logits.shape == (len(toks), N_VOCAB), logits.shape
    assert np.all(np.isfinite(logits)), "non-finite logits"
    assert float(logits.std()) > 0, "constant logits"
    return logits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--types", default=",".join(TYPES), help="comma-separated subset of " + ",".join(TYPES))
    ap.add_argument("--check-llama-cpp", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    all_logits = {}
    for t in args.types.split(","):
        path = os.path.join(args.out_dir, f"tiny-llama-{t}.gguf")
        err = write_model(path, t)
        msg = f"{path}: {os.path.getsize(path)} bytes, max |dequant - weight| {err:.2e}"
        if args.check_llama_cpp:
            logits = check_llama_cpp(path)
            all_logits[t] = logits
            msg += f", llama.cpp logits std {logits.std():.3f}"
            if "F16" in all_logits and t != "F16":
                # Same float weights, so every type must give nearly the F16 logits.
                corr = float(np.corrcoef(logits.ravel(), all_logits["F16"].ravel())[0, 1])
                msg += f", corr with F16 {corr:.4f}"
                if corr < 0.95:
                    raise SystemExit(f"{path}: llama.cpp logits disagree with F16 (corr {corr})")
        print(msg)


if __name__ == "__main__":
    sys.exit(main())
