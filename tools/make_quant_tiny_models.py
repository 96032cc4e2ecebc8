#!/usr/bin/env python3
"""Tiny Llama-shaped GGUF models in the K-quant / Q5 / IQ4 types, generated
deterministically (no data files, no llama.cpp), for the teacher-forced
tests of those types (tests/abi/teacher_forced_abitest.cpp).

Shape and tokenizer as tools/make_tiny_models.py (n_embd 256, n_ff 512, 2
layers, 4 heads, 2 KV heads, vocab 512). Every 2-D matrix (token_embd and
output included) is stored in the file's type, norms in F32. One file per
type: tiny-llama-{Q2_K,Q3_K,Q5_K,Q5_0,Q5_1,IQ4_NL,IQ4_XS}.gguf.

The weights are random *blocks*, not quantized floats: every block byte comes
from SplitMix64 (computed here with numpy uint64 arithmetic, so the bytes are
the same on every machine and numpy version), then each block's f16 scale
fields are overwritten with finite values, d = f16(c * (0.5 + k / 64)) with k
from the same generator and c per type chosen so the dequantized weights have
a standard deviation of about 0.02. Any valid block is as good a test of the
dot-product arithmetic as a quantized float, and random bits reach every bit
pattern. Norm weights are 1 + k / 20000, k in [-500, 500).

The teacher-forced goldens record each file's sha256; the test runs this
script (when the file is not there yet) and the script refuses to write a
file whose sha256 differs from the golden's (--verify), so a change in the
generator cannot silently pair a golden with another model.

Usage:
  python3 tools/make_quant_tiny_models.py OUT_DIR [--types Q2_K,...] [--verify]
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.constants import GGML_QUANT_SIZES

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_models as tiny  # noqa: E402  (shape constants, vocabulary)

SEED = 20261202

# type -> (GGML type, file type, (byte offset, c) of each f16 scale field in
# a block). c sets the field's size: the weights come out with a standard
# deviation of about 0.02-0.03, and the min fields (Q2_K/Q5_K dmin, Q5_1 m)
# roughly center them.
TYPES = {
    "Q2_K": (Q.Q2_K, gguf.LlamaFileType.MOSTLY_Q2_K, ((80, 1.5e-3), (82, 2.2e-3))),
    "Q3_K": (Q.Q3_K, gguf.LlamaFileType.MOSTLY_Q3_K_M, ((108, 5.0e-4),)),
    "Q5_K": (Q.Q5_K, gguf.LlamaFileType.MOSTLY_Q5_K_M, ((0, 5.0e-5), (2, 7.5e-4))),
    "Q5_0": (Q.Q5_0, gguf.LlamaFileType.MOSTLY_Q5_0, ((0, 3.0e-3),)),
    "Q5_1": (Q.Q5_1, gguf.LlamaFileType.MOSTLY_Q5_1, ((0, 3.0e-3), (2, -4.5e-2))),
    "IQ4_NL": (Q.IQ4_NL, gguf.LlamaFileType.MOSTLY_IQ4_NL, ((0, 3.0e-4),)),
    "IQ4_XS": (Q.IQ4_XS, gguf.LlamaFileType.MOSTLY_IQ4_XS, ((0, 2.0e-5),)),
}

MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix64(seed, n):
    """n SplitMix64 outputs (uint64) of the stream started at seed."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class Stream:
    """Consecutive draws from one SplitMix64 stream."""

    def __init__(self, seed):
        self.seed = seed
        self.pos = 0

    def u64(self, n):
        out = splitmix64((self.seed + self.pos * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF, n)
        self.pos += n
        return out

    def bytes(self, n):
        return self.u64((n + 7) // 8).view(np.uint8)[:n].copy()


def random_blocks(stream, qtype, scale_fields, n_rows, n_cols):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = n_rows * n_cols // block_elems
    b = stream.bytes(n_blocks * block_bytes).reshape(n_blocks, block_bytes)
    for off, c in scale_fields:
        k = (stream.u64(n_blocks) % np.uint64(64)).astype(np.float32)
        d = (np.float32(c) * (np.float32(0.5) + k / np.float32(64))).astype(np.float16)
        b[:, off:off + 2] = d.view(np.uint8).reshape(n_blocks, 2)
    return b.reshape(n_rows, n_cols // block_elems * block_bytes)


def tensors(type_name):
    """name -> (array, raw GGML type or None), in file order."""
    qtype, _, fields = TYPES[type_name]
    stream = Stream(SEED + list(TYPES).index(type_name))
    mat = lambda r, cols: (random_blocks(stream, qtype, fields, r, cols), qtype)

    def norm(n):
        k = (stream.u64(n) % np.uint64(1000)).astype(np.float32) - np.float32(500)
        return (np.float32(1) + k / np.float32(20000)), None

    kv_dim = tiny.N_HEAD_KV * tiny.HEAD_DIM
    t = {"token_embd.weight": mat(tiny.N_VOCAB, tiny.N_EMBD)}
    for i in range(tiny.N_LAYER):
        p = f"blk.{i}."
        t[p + "attn_norm.weight"] = norm(tiny.N_EMBD)
        t[p + "attn_q.weight"] = mat(tiny.N_EMBD, tiny.N_EMBD)
        t[p + "attn_k.weight"] = mat(kv_dim, tiny.N_EMBD)
        t[p + "attn_v.weight"] = mat(kv_dim, tiny.N_EMBD)
        t[p + "attn_output.weight"] = mat(tiny.N_EMBD, tiny.N_EMBD)
        t[p + "ffn_norm.weight"] = norm(tiny.N_EMBD)
        t[p + "ffn_gate.weight"] = mat(tiny.N_FF, tiny.N_EMBD)
        t[p + "ffn_up.weight"] = mat(tiny.N_FF, tiny.N_EMBD)
        t[p + "ffn_down.weight"] = mat(tiny.N_EMBD, tiny.N_FF)
    t["output_norm.weight"] = norm(tiny.N_EMBD)
    t["output.weight"] = mat(tiny.N_VOCAB, tiny.N_EMBD)
    return t


def write_model(path, type_name):
    _, ftype, _ = TYPES[type_name]
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_name(f"tiny-llama-{type_name}")
    wr.add_context_length(tiny.N_CTX)
    wr.add_embedding_length(tiny.N_EMBD)
    wr.add_block_count(tiny.N_LAYER)
    wr.add_feed_forward_length(tiny.N_FF)
    wr.add_head_count(tiny.N_HEAD)
    wr.add_head_count_kv(tiny.N_HEAD_KV)
    wr.add_rope_dimension_count(tiny.HEAD_DIM)
    wr.add_rope_freq_base(tiny.ROPE_BASE)
    wr.add_layer_norm_rms_eps(tiny.RMS_EPS)
    wr.add_vocab_size(tiny.N_VOCAB)
    wr.add_file_type(int(ftype))
    tiny.add_tiny_vocab(wr)
    stds = []
    for name, (arr, raw) in tensors(type_name).items():
        wr.add_tensor(name, arr, raw_dtype=raw)
        if raw is not None:
            back = np.asarray(gguf.quants.dequantize(arr, raw), dtype=np.float64)
            assert np.all(np.isfinite(back)), name
            stds.append((float(back.mean()), float(back.std())))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return max(abs(m) for m, _ in stds), min(s for _, s in stds), max(s for _, s in stds)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def golden_sha256(type_name):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "golden",
                        f"tiny-llama-{type_name}.teacher.json")
    with open(path) as f:
        return json.load(f)["model_sha256"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--types", default=",".join(TYPES), help="comma-separated subset of " + ",".join(TYPES))
    ap.add_argument("--verify", action="store_true",
                    help="fail (exit 1, file removed) unless each file's sha256 is its golden's")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    ok = True
    for type_name in args.types.split(","):
        path = os.path.join(args.out_dir, f"tiny-llama-{type_name}.gguf")
        tmp = path + ".tmp%d" % os.getpid()
        mean, lo, hi = write_model(tmp, type_name)
        digest = sha256(tmp)
        if args.verify and digest != golden_sha256(type_name):
            os.remove(tmp)
            print(f"{path}: sha256 {digest} is not the golden's: generator changed", file=sys.stderr)
            ok = False
            continue
        os.replace(tmp, path)  # atomic: concurrent test processes see a whole file
        print(f"{path}: {os.path.getsize(path)} bytes, weight |mean| <= {mean:.4f}, std {lo:.4f}..{hi:.4f}, sha256 {digest}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
