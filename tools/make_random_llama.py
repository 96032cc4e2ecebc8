#!/usr/bin/env python3
"""Generate a Llama-shaped GGUF with random weights, for throughput
benchmarks at realistic sizes (BENCHMARKS.md: "Concurrent sessions",
"libllm against llama.cpp"). Its text is gibberish; only its shapes and
bytes matter.

Shapes (--shape):
  1b       TinyLlama-1.1B's (the default): n_embd 2048, n_ff 8192, 16 layers,
           32 heads, 8 KV heads, head_dim 64, vocab 32000, rope base 10000,
           separate output.weight. 1,104,218,112 parameters.
  smollm2  SmolLM2-135M's: n_embd 576, n_ff 1536, 30 layers, 9 heads, 3 KV
           heads, head_dim 64, vocab 49152, rope base 100000, output tied to
           token_embd. 134,515,008 parameters.
  3b       Llama-3.2-3B's: n_embd 3072, n_ff 8192, 28 layers, 24 heads, 8 KV
           heads, head_dim 128, vocab 128256, rope base 500000, tied output.
           3,212,749,824 parameters.
All with rms eps 1e-5 and context 2048. The parameter count is checked
against the tensors written.

Types (--type): every 2-D matrix (token_embd and output included) in
  q4_0, q4_1, q8_0  through gguf.quants.quantize (ggml's reference
                    quantizers, vectorised in numpy);
  f16               numpy's float16;
  q4_k_m, q6_k      an f16 file made as above, then llama.cpp's own quantizer
                    (llama_cpp.llama_model_quantize from llama-cpp-python, the
                    reference implementation; or, with --llama-quantize PATH,
                    a llama-quantize binary of the same llama.cpp, e.g. built
                    next to bench/compare_llamacpp.sh's llama-bench), so the
                    file mixes types as real Q4_K_M files do.
Norms are F32 = 1.0. Matrices ~ N(0, 0.02) from numpy's PCG64 seeded with
SEED, so activations stay finite through every layer; the first matrix is
dequantized again and its error bounded.

Tokenizer: SentencePiece-style "llama" metadata as in make_tiny_models.py,
grown to the shape's vocabulary: "<unk>" (0), "<s>" (1, bos), "</s>" (2,
eos), 256 byte tokens, then letter pieces with decreasing scores.

Usage: python3 tools/make_random_llama.py [--shape S] [--type T] [OUT_PATH]
  OUT_PATH defaults to $LLM_CACHE_DIR/random-llama-S-T.gguf
  ($LLM_CACHE_DIR defaults to ~/.cache/libllm). Never write it into the repo.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tiny_models  # noqa: E402  (the shared llama vocabulary)

SHAPES = {
    # name: (n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, rope_base, tied, n_params)
    "1b": (2048, 8192, 16, 32, 8, 32000, 10000.0, False, 1_104_218_112),
    "smollm2": (576, 1536, 30, 9, 3, 49152, 100000.0, True, 134_515_008),
    "3b": (3072, 8192, 28, 24, 8, 128256, 500000.0, True, 3_212_749_824),
}
# --type: (tensor type written by numpy, GGUF file type, llama.cpp ftype to
# requantize to or None). LLAMA_FTYPE_MOSTLY_Q4_K_M = 15, _Q6_K = 18.
TYPES = {
    "q4_0": (Q.Q4_0, gguf.LlamaFileType.MOSTLY_Q4_0, None),
    "q4_1": (Q.Q4_1, gguf.LlamaFileType.MOSTLY_Q4_1, None),
    "q8_0": (Q.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0, None),
    "f16": (Q.F16, gguf.LlamaFileType.MOSTLY_F16, None),
    "q4_k_m": (Q.F16, gguf.LlamaFileType.MOSTLY_F16, 15),
    "q6_k": (Q.F16, gguf.LlamaFileType.MOSTLY_F16, 18),
}
N_CTX = 2048
RMS_EPS = 1e-5
SEED = 20261130


def tensor_shapes(shape):
    """(name, shape) in numpy (rows, cols) order; GGUF dims are reversed."""
    n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, _, tied, _ = SHAPES[shape]
    kv_dim = n_head_kv * (n_embd // n_head)
    yield "token_embd.weight", (n_vocab, n_embd)
    for i in range(n_layer):
        p = f"blk.{i}."
        yield p + "attn_norm.weight", (n_embd,)
        yield p + "attn_q.weight", (n_embd, n_embd)
        yield p + "attn_k.weight", (kv_dim, n_embd)
        yield p + "attn_v.weight", (kv_dim, n_embd)
        yield p + "attn_output.weight", (n_embd, n_embd)
        yield p + "ffn_norm.weight", (n_embd,)
        yield p + "ffn_gate.weight", (n_ff, n_embd)
        yield p + "ffn_up.weight", (n_ff, n_embd)
        yield p + "ffn_down.weight", (n_embd, n_ff)
    yield "output_norm.weight", (n_embd,)
    if not tied:
        yield "output.weight", (n_vocab, n_embd)


def write_model(path, shape, qtype, ftype):
    n_embd, n_ff, n_layer, n_head, n_head_kv, n_vocab, rope_base, _, n_expected = SHAPES[shape]
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_name(f"random-llama-{shape}-{qtype.name}")
    wr.add_context_length(N_CTX)
    wr.add_embedding_length(n_embd)
    wr.add_block_count(n_layer)
    wr.add_feed_forward_length(n_ff)
    wr.add_head_count(n_head)
    wr.add_head_count_kv(n_head_kv)
    wr.add_rope_dimension_count(n_embd // n_head)
    wr.add_rope_freq_base(rope_base)
    wr.add_layer_norm_rms_eps(RMS_EPS)
    wr.add_vocab_size(n_vocab)
    wr.add_file_type(int(ftype))
    make_tiny_models.add_tiny_vocab(wr, n_vocab)

    rng = np.random.default_rng(SEED)
    n_params = 0
    checked = False
    for name, tshape in tensor_shapes(shape):
        n_params += int(np.prod(tshape))
        if len(tshape) == 1:
            wr.add_tensor(name, np.ones(tshape, dtype=np.float32))
            continue
        x = rng.standard_normal(tshape, dtype=np.float32)
        x *= np.float32(0.02)
        if qtype == Q.F16:
            q = x.astype(np.float16)
            back = q.astype(np.float32)
        else:
            q = gguf.quants.quantize(x, qtype)
            back = None if checked else np.asarray(gguf.quants.dequantize(q, qtype), dtype=np.float32)
        if not checked:
            # Weights have |x| up to ~0.1; 4-bit steps are ~0.2/15.
            err = float(np.abs(back.reshape(tshape) - x).max())
            if not err <= 2.5e-2:
                raise SystemExit(f"{name}: {qtype.name} round-trip error {err}")
            checked = True
        del x
        if qtype == Q.F16:
            wr.add_tensor(name, q)
        else:
            wr.add_tensor(name, q, raw_dtype=qtype)
    assert n_params == n_expected, (n_params, n_expected)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return n_params


def requantize(src, dst, llama_ftype, llama_quantize=None):
    """llama.cpp's quantizer (the reference implementation's) on an f16 file."""
    if llama_quantize:
        name = {15: "Q4_K_M", 18: "Q6_K"}[llama_ftype]
        rc = subprocess.run([llama_quantize, src, dst, name, "2"], stdout=subprocess.DEVNULL).returncode
        if rc != 0:
            raise SystemExit(f"{llama_quantize} {src} {dst} {name} failed: {rc}")
        return
    import llama_cpp  # only needed for K-quant files

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_ftype
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(src.encode(), dst.encode(), params)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize({src} -> {dst}) failed: {rc}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="1b")
    ap.add_argument("--type", choices=sorted(TYPES), default="q4_0")
    ap.add_argument("--llama-quantize", metavar="PATH",
                    help="llama.cpp's llama-quantize binary for the K-quant types "
                         "(default: llama-cpp-python's llama_model_quantize)")
    ap.add_argument("out", nargs="?")
    args = ap.parse_args()
    cache = os.environ.get("LLM_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "libllm"))
    out = args.out or os.path.join(cache, f"random-llama-{args.shape}-{args.type}.gguf")
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    qtype, ftype, llama_ftype = TYPES[args.type]
    tmp = out + ".tmp"
    t0 = time.time()
    if llama_ftype is None:
        n = write_model(tmp, args.shape, qtype, ftype)
    else:
        f16 = out + ".f16.tmp"
        try:
            n = write_model(f16, args.shape, qtype, ftype)
            requantize(f16, tmp, llama_ftype, args.llama_quantize)
        finally:
            if os.path.exists(f16):
                os.remove(f16)
    os.replace(tmp, out)  # never leave a half-written file at the final path
    print(f"{out}: {n:,} parameters, {os.path.getsize(out):,} bytes, {time.time() - t0:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
