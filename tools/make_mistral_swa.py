#!/usr/bin/env python3
"""Generate a tiny Mistral-shaped GGUF with a sliding attention window.

Mistral 7B v0.1 is a `llama` architecture model whose every layer attends to
the last `sliding_window` positions only; its GGUF carries
`llama.attention.sliding_window`. This file has that shape at toy size:
arch "llama", n_embd 128, n_ff 128, 2 layers, 4 heads, 1 KV head (GQA 4:1,
as Mistral's 32:8), head_dim 32, vocabulary 512 (the tiny models' SentencePiece
vocabulary, tools/make_tiny_models.py), context 512, rope freq_base 10000,
rms eps 1e-5, llama.attention.sliding_window = 64. Matrices F16, norms F32.

The weights are random (seeded) but larger than the tiny models' (~N(0, 0.02)):
the attention projections are scaled so that the attention is peaked and
what lies outside the window matters to the logits -- a model whose
attention is nearly uniform would pass a window test without a window. The
goldens' generator (tools/gen_teacher_goldens.py --sliding-window) reports
how far the full-attention logits are from the windowed ones.

Usage: python3 tools/make_mistral_swa.py OUT_DIR
Writes OUT_DIR/tiny-mistral-swa-F16.gguf.
"""
import argparse
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_models import add_tiny_vocab  # noqa: E402  (the shared 512-entry vocabulary)

N_EMBD = 128
N_FF = 128
N_LAYER = 2
N_HEAD = 4
N_HEAD_KV = 1
HEAD_DIM = N_EMBD // N_HEAD  # 32
N_VOCAB = 512
N_CTX = 512
WINDOW = 64
ROPE_BASE = 10000.0
RMS_EPS = 1e-5
SEED = 4242
NAME = "tiny-mistral-swa-F16"


def weights():
    """name -> float32 array in numpy (rows, cols) order; GGUF dims are reversed."""
    rng = np.random.default_rng(SEED)

    def mat(r, c, std):
        return (rng.standard_normal((r, c)) * std).astype(np.float32)

    def norm(n):
        return (1.0 + rng.standard_normal(n) * 0.05).astype(np.float32)

    kv_dim = N_HEAD_KV * HEAD_DIM
    w = {"token_embd.weight": mat(N_VOCAB, N_EMBD, 1.0)}
    for i in range(N_LAYER):
        p = f"blk.{i}."
        w[p + "attn_norm.weight"] = norm(N_EMBD)
        # q.k / sqrt(head_dim) with unit-RMS inputs: std ~ 0.3 * 0.3 * 128 /
        # sqrt(32) ~ 2, so softmax weights vary by e^2 and more between keys.
        w[p + "attn_q.weight"] = mat(N_EMBD, N_EMBD, 0.3)
        w[p + "attn_k.weight"] = mat(kv_dim, N_EMBD, 0.3)
        w[p + "attn_v.weight"] = mat(kv_dim, N_EMBD, 0.2)
        w[p + "attn_output.weight"] = mat(N_EMBD, N_EMBD, 0.1)
        w[p + "ffn_norm.weight"] = norm(N_EMBD)
        w[p + "ffn_gate.weight"] = mat(N_FF, N_EMBD, 0.1)
        w[p + "ffn_up.weight"] = mat(N_FF, N_EMBD, 0.1)
        w[p + "ffn_down.weight"] = mat(N_EMBD, N_FF, 0.1)
    w["output_norm.weight"] = norm(N_EMBD)
    w["output.weight"] = mat(N_VOCAB, N_EMBD, 0.1)
    return w


def write_model(path):
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_name(NAME)
    wr.add_context_length(N_CTX)
    wr.add_embedding_length(N_EMBD)
    wr.add_block_count(N_LAYER)
    wr.add_feed_forward_length(N_FF)
    wr.add_head_count(N_HEAD)
    wr.add_head_count_kv(N_HEAD_KV)
    wr.add_rope_dimension_count(HEAD_DIM)
    wr.add_rope_freq_base(ROPE_BASE)
    wr.add_layer_norm_rms_eps(RMS_EPS)
    wr.add_sliding_window(WINDOW)  # llama.attention.sliding_window
    wr.add_vocab_size(N_VOCAB)
    wr.add_file_type(int(gguf.LlamaFileType.MOSTLY_F16))
    add_tiny_vocab(wr, N_VOCAB)
    for name, x in weights().items():
        wr.add_tensor(name, x if x.ndim == 1 else x.astype(np.float16))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, NAME + ".gguf")
    write_model(path)
    r = gguf.GGUFReader(path)
    window = r.fields["llama.attention.sliding_window"]
    assert int(window.parts[window.data[0]][0]) == WINDOW
    print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
