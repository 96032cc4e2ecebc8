#!/usr/bin/env python3
"""Generate a Llama-shaped GGUF of about 1B parameters with random weights,
for throughput benchmarks at a realistic size (BENCHMARKS.md, "Concurrent
sessions"). Its text is gibberish; only its shapes and bytes matter.

Shape (TinyLlama-1.1B's): arch "llama", n_embd 2048, n_ff 8192, 16 layers,
32 heads, 8 KV heads (GQA), head_dim 64, vocab 32000, context 2048, rope
freq_base 10000, rms eps 1e-5, separate output.weight (not tied).
Parameters: 1,104,218,112 (1,104,150,528 in the 2-D matrices, 67,584 in the
norms); N_PARAMS below is checked against the tensors written. File: about
621 MB (Q4_0 is 18 bytes per 32 weights).

Weights: every 2-D matrix (token_embd and output included) in Q4_0, norms
F32 = 1.0. Matrices ~ N(0, 0.02) from numpy's PCG64 seeded with SEED, so
activations stay finite through 16 layers. Q4_0 bytes come from
gguf.quants.quantize (ggml's quantize_row_q4_0_ref in numpy, vectorised: the
whole file takes well under a minute, so no own encoder is needed); the first
matrix is dequantized again and its error bounded.

Tokenizer: SentencePiece-style "llama" metadata as in make_tiny_models.py,
grown to 32000 pieces: "<unk>" (0), "<s>" (1, bos), "</s>" (2, eos), 256 byte
tokens, then "▁", letters, letter pairs and triples with decreasing scores.

Usage: python3 tools/make_random_llama.py [OUT_PATH]
  OUT_PATH defaults to $LLM_CACHE_DIR/random-llama-1b-q4_0.gguf
  ($LLM_CACHE_DIR defaults to ~/.cache/libllm). Never write it into the repo.
"""
import argparse
import os
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_models  # noqa: E402  (the shared llama vocabulary)

N_EMBD = 2048
N_FF = 8192
N_LAYER = 16
N_HEAD = 32
N_HEAD_KV = 8
HEAD_DIM = N_EMBD // N_HEAD  # 64
N_VOCAB = 32000
N_CTX = 2048
ROPE_BASE = 10000.0
RMS_EPS = 1e-5
SEED = 20261130

KV_DIM = N_HEAD_KV * HEAD_DIM
N_PARAMS = (2 * N_VOCAB * N_EMBD + N_EMBD
            + N_LAYER * (2 * N_EMBD * N_EMBD + 2 * KV_DIM * N_EMBD + 3 * N_EMBD * N_FF + 2 * N_EMBD))


def vocab():
    return make_tiny_models.vocab(N_VOCAB)


def tensor_shapes():
    """(name, shape) in numpy (rows, cols) order; GGUF dims are reversed."""
    yield "token_embd.weight", (N_VOCAB, N_EMBD)
    for i in range(N_LAYER):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", (N_EMBD,)
        yield p + "attn_q.weight", (N_EMBD, N_EMBD)
        yield p + "attn_k.weight", (KV_DIM, N_EMBD)
        yield p + "attn_v.weight", (KV_DIM, N_EMBD)
        yield p + "attn_output.weight", (N_EMBD, N_EMBD)
        yield p + "ffn_norm.weight", (N_EMBD,)
        yield p + "ffn_gate.weight", (N_FF, N_EMBD)
        yield p + "ffn_up.weight", (N_FF, N_EMBD)
        yield p + "ffn_down.weight", (N_EMBD, N_FF)
    yield "output_norm.weight", (N_EMBD,)
    yield "output.weight", (N_VOCAB, N_EMBD)


def write_model(path):
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_name("random-llama-1b-Q4_0")
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
    wr.add_file_type(int(gguf.LlamaFileType.MOSTLY_Q4_0))
    tokens, scores, types = vocab()
    wr.add_tokenizer_model("llama")
    wr.add_token_list(tokens)
    wr.add_token_scores(scores)
    wr.add_token_types(types)
    wr.add_unk_token_id(0)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    wr.add_add_bos_token(True)
    wr.add_add_eos_token(False)

    rng = np.random.default_rng(SEED)
    n_params = 0
    checked = False
    for name, shape in tensor_shapes():
        n_params += int(np.prod(shape))
        if len(shape) == 1:
            wr.add_tensor(name, np.ones(shape, dtype=np.float32))
            continue
        x = rng.standard_normal(shape, dtype=np.float32)
        x *= np.float32(0.02)
        q = gguf.quants.quantize(x, Q.Q4_0)
        if not checked:
            # Weights have |x| up to ~0.1; 4-bit steps are ~0.2/15.
            back = np.asarray(gguf.quants.dequantize(q, Q.Q4_0), dtype=np.float32).reshape(shape)
            err = float(np.abs(back - x).max())
            if not err <= 2.5e-2:
                raise SystemExit(f"{name}: Q4_0 round-trip error {err}")
            checked = True
        del x
        wr.add_tensor(name, q, raw_dtype=Q.Q4_0)
    assert n_params == N_PARAMS, (n_params, N_PARAMS)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return n_params


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cache = os.environ.get("LLM_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "libllm"))
    ap.add_argument("out", nargs="?", default=os.path.join(cache, "random-llama-1b-q4_0.gguf"))
    args = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    t0 = time.time()
    n = write_model(tmp)
    os.replace(tmp, args.out)  # never leave a half-written file at the final path
    print(f"{args.out}: {n:,} parameters, {os.path.getsize(args.out):,} bytes, {time.time() - t0:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
