#!/usr/bin/env python3
"""Unrounded teacher-forced comparison of libllm with llama-cpp-python.

The teacher-forced goldens store logits rounded to 1/inv_scale; this tool
compares the float logits themselves, bit for bit, at every position of a
golden's prompts: llama-cpp-python with its default settings (no
logits_all, so its output matrix multiplies the sampling row only; ggml's
tiled K-quant matmul as the environment leaves it, GGML_CPU_TILED_MM unset =
on), an F32 KV cache and 2 threads, against libllm's shared library (same
KV type) fed the same prompt and continuation tokens (prompt in one prefill
call, then one token per call, as tests/abi/teacher_forced_abitest.cpp
does). --kv f16 runs both with an F16 cache; --logits-all runs the reference
with logits_all, as the SmolLM2 goldens were made. Both run at this
machine's SIMD level (libllm's as LLM_CPU_ISA caps it; llama.cpp's as it
was built).

Usage:
  python3 tools/check_teacher_bits.py --model tiny-llama-Q3_K.gguf \\
      --golden tests/data/golden/tiny-llama-Q3_K.teacher.json [--lib build/libllm.so]
  python3 tools/check_teacher_bits.py --model SmolLM2-135M-Instruct.Q4_1.gguf \\
      --golden tests/data/golden/smollm2-avx2.teacher.json --kv f16 --logits-all
Prints, per prompt, the positions whose logits differ (position 0 = the
logits after the prompt) and the largest |diff|; exit status 1 if any differ.
docs/KQUANTS.md has the results for the tiny K-quant models, docs/GOLDENS.md
for SmolLM2 at the AVX2 level.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# Reads "n_prompt n_cont ids... cont..." lines, writes n_cont x n_vocab f32
# logits per prompt.
DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include "llm/llm.h"
int main(int argc, char **argv) {
  llm_model *m = NULL;
  if (argc != 3 || llm_model_load(argv[1], NULL, &m) != LLM_OK) return 1;
  FILE *out = fopen(argv[2], "wb");
  int np, nc;
  while (out != NULL && scanf("%d %d", &np, &nc) == 2) {
    llm_token *ids = malloc(sizeof(llm_token) * (size_t)(np + nc));
    for (int i = 0; i < np + nc; ++i)
      if (scanf("%d", &ids[i]) != 1) return 2;
    llm_session_params sp;
    llm_session_params_init(&sp);
    sp.n_ctx = 512;
    sp.kv_type = KV_TYPE;
    llm_session *s = NULL;
    if (llm_session_create(m, &sp, &s) != LLM_OK) return 3;
    if (llm_session_prefill(s, ids, (size_t)np) != LLM_OK) return 4;
    for (int j = 0; j < nc; ++j) {
      const float *lg = NULL;
      size_t nv = 0;
      if (llm_session_logits(s, &lg, &nv) != LLM_OK) return 5;
      fwrite(lg, sizeof(float), nv, out);
      if (j + 1 < nc && llm_session_prefill(s, &ids[np + j], 1) != LLM_OK) return 6;
    }
    llm_session_free(s);
    free(ids);
  }
  if (out == NULL || fclose(out) != 0) return 7;
  llm_model_free(m);
  return 0;
}
"""


def reference(model, prompts, n_threads, kv, logits_all):
    import llama_cpp
    import llama_cpp.llama

    default_params = llama_cpp.llama_model_default_params

    def no_extra_bufts():  # as tools/gen_teacher_goldens.py
        p = default_params()
        if hasattr(p, "use_extra_bufts"):
            p.use_extra_bufts = False
        return p

    llama_cpp.llama.llama_cpp.llama_model_default_params = no_extra_bufts
    kv_kwargs = {"type_k": 0, "type_v": 0} if kv == "f32" else {}  # 0 = GGML_TYPE_F32
    llm = llama_cpp.Llama(model_path=model, n_ctx=512, logits_all=logits_all, n_threads=n_threads,
                          seed=0, verbose=False, **kv_kwargs)
    nv = llm.n_vocab()
    out = []
    for ids, cont in prompts:
        llm.reset()
        llm.eval(ids)
        for j in range(len(cont)):
            if logits_all:
                out.append(np.array(llm.scores[llm.n_tokens - 1, :], dtype=np.float32))
            else:
                ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
                out.append(np.ctypeslib.as_array(ptr, shape=(nv,)).copy())
            if j + 1 < len(cont):
                llm.eval([cont[j]])
    return np.array(out, dtype=np.float32), nv


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--golden", required=True, help="a golden's .json (prompts and continuations)")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libllm.so"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv", choices=("f32", "f16"), default="f32", help="KV cache type of both")
    ap.add_argument("--logits-all", action="store_true",
                    help="the reference with logits_all (as the SmolLM2 goldens were made)")
    args = ap.parse_args()
    meta = json.load(open(args.golden))
    prompts = [(p["ids"], p["continuation"]) for p in meta["prompts"]]
    ref, nv = reference(args.model, prompts, args.threads, args.kv, args.logits_all)

    lib_dir = os.path.dirname(os.path.abspath(args.lib))
    with tempfile.TemporaryDirectory() as tmp:
        src, exe, raw = (os.path.join(tmp, n) for n in ("driver.c", "driver", "logits.bin"))
        with open(src, "w") as f:
            f.write(DRIVER.replace("KV_TYPE", "LLM_KV_F16" if args.kv == "f16" else "LLM_KV_F32"))
        subprocess.check_call(["cc", "-O2", src, "-I", os.path.join(ROOT, "include"), "-L", lib_dir,
                               "-lllm", "-o", exe])
        lines = "\n".join(" ".join(map(str, [len(i), len(c)] + list(i) + list(c))) for i, c in prompts)
        subprocess.run([exe, args.model, raw], input=lines + "\n", text=True, check=True,
                       env=dict(os.environ, LD_LIBRARY_PATH=lib_dir))
        ours = np.fromfile(raw, np.float32).reshape(-1, nv)
    if ours.shape != ref.shape:
        sys.exit("libllm gave %s logits, the reference %s" % (ours.shape, ref.shape))
    differ = ours.view(np.int32) != ref.view(np.int32)
    row = 0
    for pi, (ids, cont) in enumerate(prompts):
        d = differ[row:row + len(cont)]
        pos = [int(j) for j in np.nonzero(d.any(axis=1))[0]]
        print("prompt %d (%3d tokens): %d/%d positions differ %s" % (pi, len(ids), len(pos), len(cont),
                                                                    pos if pos else ""))
        row += len(cont)
    n = int(differ.any(axis=1).sum())
    print("%s: %d of %d positions differ, %d logits, max |diff| %.3g"
          % (os.path.basename(args.model), n, len(ref), int(differ.sum()), float(np.abs(ours - ref).max())))
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
