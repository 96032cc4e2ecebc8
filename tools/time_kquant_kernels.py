#!/usr/bin/env python3
"""Time libllm's K-quant matrix-vector kernels per SIMD level, and ggml-cpu's
ggml_vec_dot_<type>_q8_K when llama-cpp-python is importable, in one process
on the same random weights and activations.

One case = one n_out x n_in product (default 8192 x 2048, the 1B model's
ffn_up) against one Q8_K activation row, one thread, the kernel alone (no
activation quantization, no thread pool). The implementations run in
interleaved rounds (each round times every implementation once, in a
rotating order), and the minimum over rounds is reported: on a shared
machine the minimum is the most stable estimate of the uncontended time.
Also --rows R times a batch of R activation rows (libllm levels only: ggml
runs batches through other code).

libllm side: src/backend/cpu/kquant_{scalar,avx2,avx512}.cpp compiled here
with the Release build's flags (-O3, the per-file ISA flags) behind a C shim; ggml side: the
libggml-cpu.so that llama-cpp-python ships (or --ggml-lib-dir), called
through a function pointer from the same C timing loop.

Usage: python3 tools/time_kquant_kernels.py [--types q4_K,q6_K] [--rounds 200]
       [--n-out 8192] [--n-in 2048] [--rows 1] [--no-ggml] [--ggml-lib-dir DIR]
Results: BENCHMARKS.md.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

SHIM = r'''
#include <time.h>
#include <cstdint>
#include "backend/cpu/kquant_kernels.h"
using namespace llm;
typedef void (*vec_dot_t)(int n, float* s, size_t bs, const void* vx, size_t bx, const void* vy,
                          size_t by, int nrc);
static double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
extern "C" void shim_q8k(const float* x, long n, signed char* q, float* d, short* bs) {
  qmm::QuantizeRowQ8K(x, n, reinterpret_cast<int8_t*>(q), d, reinterpret_cast<int16_t*>(bs));
}
// level: 0 scalar, 1 AVX2, 2 AVX-512. Returns seconds of one call over
// n_out weight rows and n_rows activation rows.
extern "C" double shim_time(int level, int type, const void* w, long row_bytes, long n_out, long n,
                            long n_rows, const signed char* q, const float* d, const short* bs,
                            float* y) {
  qmm::Acts a;
  a.n_rows = n_rows;
  a.n_in = n;
  a.kq = reinterpret_cast<const int8_t*>(q);
  a.kd = d;
  a.kbsum = reinterpret_cast<const int16_t*>(bs);
  a.n_kblocks = n / 256;
  qmm::Kernel k = level == 0   ? qmm::KQuantScalarKernel(static_cast<DType>(type))
                  : level == 1 ? qmm::KQuantAvx2Kernel(static_cast<DType>(type))
                               : qmm::KQuantAvx512Kernel(static_cast<DType>(type));
  if (k == nullptr) return -1.0;
  const double t0 = Now();
  k(w, row_bytes, 0, n_out, a, y, n_out, nullptr);
  return Now() - t0;
}
// ggml: one vec_dot per weight row (as ggml-cpu's mul_mat does for one
// activation row). blocks: ggml's block_q8_K array.
extern "C" double shim_time_ggml(void* fn, const void* w, long row_bytes, long n_out, long n,
                                 const void* blocks, float* y) {
  vec_dot_t f = reinterpret_cast<vec_dot_t>(fn);
  const double t0 = Now();
  for (long o = 0; o < n_out; ++o) {
    f(static_cast<int>(n), y + o, 0, static_cast<const char*>(w) + o * row_bytes, 0, blocks, 0, 1);
  }
  return Now() - t0;
}
'''

# name -> (GGML type id, block bytes, byte offsets of the f16 scales)
TYPES = {"q2_K": (10, 84, [80, 82]), "q3_K": (11, 110, [108]), "q4_K": (12, 144, [0, 2]),
         "q5_K": (13, 176, [0, 2]), "q6_K": (14, 210, [208]), "iq4_xs": (23, 136, [0])}


def build_shim(out_dir):
    src = os.path.join(out_dir, "shim.cpp")
    with open(src, "w") as f:
        f.write(SHIM)
    inc = ["-I" + os.path.join(ROOT, "src"), "-I" + ROOT]
    cpu = os.path.join(ROOT, "src", "backend", "cpu")
    flags = {"kquant_avx2": ["-mavx2", "-mfma", "-mf16c"],
             "kquant_avx512": ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mavx512vnni",
                               "-mavx512bf16", "-mavx2", "-mfma", "-mf16c"],
             "kquant_scalar": []}
    objs = []
    for name, f in flags.items():
        obj = os.path.join(out_dir, name + ".o")
        subprocess.check_call(["g++", "-O3", "-DNDEBUG", "-std=c++17", "-fPIC", *f, *inc, "-c",
                               os.path.join(cpu, name + ".cpp"), "-o", obj])
        objs.append(obj)
    lib = os.path.join(out_dir, "libshim.so")
    subprocess.check_call(["g++", "-O3", "-DNDEBUG", "-std=c++17", "-fPIC", "-shared", *inc, src, *objs, "-o", lib])
    return ctypes.CDLL(lib)


def load_ggml(arg):
    d = arg
    if not d:
        import llama_cpp
        d = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    ctypes.CDLL(os.path.join(d, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    ggml = ctypes.CDLL(os.path.join(d, "libggml-cpu.so"))
    ggml.ggml_cpu_init()
    return ggml


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--types", default="q4_K,q6_K,q5_K")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--n-out", type=int, default=8192)
    ap.add_argument("--n-in", type=int, default=2048)
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--levels", default="1,2", help="libllm levels: 0 scalar, 1 AVX2, 2 AVX-512")
    ap.add_argument("--no-ggml", action="store_true")
    ap.add_argument("--ggml-lib-dir", default=None)
    args = ap.parse_args()
    ggml = None
    if not args.no_ggml and args.rows == 1:
        try:
            ggml = load_ggml(args.ggml_lib_dir)
        except (ImportError, OSError) as e:
            print(f"ggml not available ({e}); libllm levels only")
    rng = np.random.default_rng(1)
    n, n_out, rows = args.n_in, args.n_out, args.rows
    nb = n // 256
    levels = [int(v) for v in args.levels.split(",")]
    names = {0: "scalar", 1: "avx2", 2: "avx512"}
    with tempfile.TemporaryDirectory() as tmp:
        ours = build_shim(tmp)
        ours.shim_time.restype = ctypes.c_double
        ours.shim_time_ggml.restype = ctypes.c_double
        ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)
        print(f"{n_out} x {n} x {rows} rows, {args.rounds} interleaved rounds, min (ms)")
        for tname in args.types.split(","):
            t, bb, offs = TYPES[tname]
            w = rng.integers(0, 256, size=(n_out * nb, bb), dtype=np.uint8)
            for o in offs:
                w[:, o:o + 2] = rng.uniform(0.001, 0.05, n_out * nb).astype(np.float16).view(
                    np.uint8).reshape(-1, 2)
            x = rng.standard_normal(rows * n).astype(np.float32)
            q = np.zeros(rows * n, np.int8)
            d = np.zeros(rows * nb, np.float32)
            bs = np.zeros(rows * nb * 16, np.int16)
            for r in range(rows):
                ours.shim_q8k(ptr(x[r * n:]), ctypes.c_long(n), ptr(q[r * n:]), ptr(d[r * nb:]),
                              ptr(bs[r * nb * 16:]))
            impls = [("libllm " + names[l], l) for l in levels]
            if ggml is not None:
                impls.append(("ggml vec_dot", None))
                blocks = np.zeros((nb, 292), np.uint8)
                blocks[:, :4] = d.view(np.uint8).reshape(nb, 4)
                blocks[:, 4:260] = q.view(np.uint8).reshape(nb, 256)
                blocks[:, 260:] = bs.view(np.uint8).reshape(nb, 32)
                fn = ctypes.cast(getattr(ggml, f"ggml_vec_dot_{tname}_q8_K"), ctypes.c_void_p)
            best = {name: float("inf") for name, _ in impls}
            outs = {}
            for rnd in range(args.rounds):
                k = rnd % len(impls)
                for name, lvl in impls[k:] + impls[:k]:
                    y = np.zeros(rows * n_out, np.float32)
                    if lvl is None:
                        s = ours.shim_time_ggml(fn, ptr(w), ctypes.c_long(nb * bb), ctypes.c_long(n_out),
                                                ctypes.c_long(n), ptr(blocks), ptr(y))
                    else:
                        s = ours.shim_time(lvl, t, ptr(w), ctypes.c_long(nb * bb), ctypes.c_long(n_out),
                                           ctypes.c_long(n), ctypes.c_long(rows), ptr(q), ptr(d), ptr(bs),
                                           ptr(y))
                    if s < 0:
                        continue
                    best[name] = min(best[name], s)
                    outs[name] = y
            ref = outs.get("libllm avx2")
            line = []
            for name, _ in impls:
                if best[name] == float("inf"):
                    continue
                same = "" if ref is None or name == "libllm scalar" else (
                    " (=avx2)" if outs[name].tobytes() == ref.tobytes() else " (DIFFERS from avx2)")
                line.append(f"{name} {1e3 * best[name]:.3f}{same}")
            print(f"{tname:7s} " + ", ".join(line))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
