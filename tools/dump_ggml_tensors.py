#!/usr/bin/env python3
"""Dump llama.cpp's named intermediate tensors for one teacher-golden prompt.

Runs the prompt of a teacher-forced golden (tools/gen_teacher_goldens.py
format, version 1 or 2) through llama-cpp-python with the graph evaluation
callback (llama_context_params.cb_eval) and saves every contiguous-in-rows
f32 tensor the CPU backend computed, keyed "<step>/<name>" (step 0: the
prompt's pass, step j: the j-th continuation token fed alone), e.g.
"0/attn_norm-0", "0/Vcur-0", "1/kqv_out-1", as a .npz. Same settings as the
golden generator: n_ctx 512, 2 threads, no extra buffer types, F32 KV with
--kv-f32. Used to find where libllm and llama.cpp part (docs/KQUANTS.md);
set GGML_CPU_TILED_MM=0 to run ggml's vec_dot K-quant path for batches.

Usage: python3 tools/dump_ggml_tensors.py --model M.gguf --golden G.teacher.bin.gz \\
           --prompt 4 [--steps 2] [--kv-f32] --out dump.npz
"""
import argparse
import ctypes
import gzip
import struct

import numpy as np


class GgmlTensor(ctypes.Structure):
    # struct ggml_tensor of ggml.h (GGML_MAX_DIMS 4, GGML_MAX_OP_PARAMS 64,
    # GGML_MAX_SRC 10, GGML_MAX_NAME 64) in llama-cpp-python 0.3.36.
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int),
                ("op_params", ctypes.c_int32 * 16), ("flags", ctypes.c_int32),
                ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p),
                ("name", ctypes.c_char * 64), ("extra", ctypes.c_void_p),
                ("padding", ctypes.c_char * 8)]


def read_prompts(path):
    raw = gzip.open(path).read()
    _, version, n_vocab, n_prompts, n_cont, _, _ = struct.unpack_from("<8s6I", raw, 0)
    off = 32
    n_stored = n_vocab
    if version == 2:
        n_top, n_sample = struct.unpack_from("<2I", raw, off)
        off += 8
        n_stored = n_top + n_sample
    prompts = []
    for _ in range(n_prompts):
        (n,) = struct.unpack_from("<I", raw, off)
        off += 4
        ids = list(struct.unpack_from("<%di" % n, raw, off))
        off += 4 * n
        cont = list(struct.unpack_from("<%di" % n_cont, raw, off))
        off += 4 * n_cont
        per_pos = 2 * n_vocab if version == 1 else 4 + 6 * n_stored
        off += per_pos * n_cont
        prompts.append((ids, cont))
    return prompts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--golden", required=True)
    ap.add_argument("--prompt", type=int, default=0)
    ap.add_argument("--steps", type=int, default=0, help="continuation tokens fed after the prompt")
    ap.add_argument("--kv-f32", action="store_true")
    ap.add_argument("--n-ctx", type=int, default=512)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import llama_cpp

    ids, cont = read_prompts(args.golden)[args.prompt]
    dumps, step = {}, [0]

    def on_tensor(t, ask, _user):
        if ask:
            return True  # observe every node
        tt = ctypes.cast(t, ctypes.POINTER(GgmlTensor)).contents
        ne, nb = list(tt.ne), list(tt.nb)
        if tt.type == 0 and nb[0] == 4 and tt.data:  # f32
            span = sum((ne[i] - 1) * nb[i] for i in range(4)) + 4
            base = np.frombuffer((ctypes.c_char * span).from_address(tt.data), dtype=np.uint8)
            arr = np.lib.stride_tricks.as_strided(base.view(np.float32), shape=ne[::-1],
                                                  strides=nb[::-1])
            dumps["%d/%s" % (step[0], tt.name.decode())] = arr.copy()
        return True

    callback = llama_cpp.ggml_backend_sched_eval_callback(on_tensor)
    ctx_default = llama_cpp.llama.llama_cpp.llama_context_default_params
    model_default = llama_cpp.llama.llama_cpp.llama_model_default_params

    def ctx_params():
        p = ctx_default()
        p.cb_eval = callback
        return p

    def model_params():
        p = model_default()
        if hasattr(p, "use_extra_bufts"):
            p.use_extra_bufts = False
        return p

    llama_cpp.llama.llama_cpp.llama_context_default_params = ctx_params
    llama_cpp.llama.llama_cpp.llama_model_default_params = model_params
    kv = {"type_k": 0, "type_v": 0} if args.kv_f32 else {}
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=args.n_ctx, logits_all=True, n_threads=2,
                          seed=0, verbose=False, **kv)
    llm.eval(ids)
    for j in range(args.steps):
        step[0] += 1
        llm.eval([cont[j]])
    np.savez(args.out, **dumps)
    print("%d tensors -> %s" % (len(dumps), args.out))


if __name__ == "__main__":
    main()
