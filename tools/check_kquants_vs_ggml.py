#!/usr/bin/env python3
"""Compare libllm's K-quant kernels and Q8_K quantizer with ggml-cpu's own,
bit for bit, by calling both on the same random inputs.

ggml side: quantize_row_q8_K and ggml_vec_dot_<type>_q8_K, exported by the
libggml-cpu.so that llama-cpp-python ships (or --ggml-lib-dir). libllm side:
src/backend/cpu/kquant_avx2.cpp and kquant_scalar.cpp compiled here with g++
into a small shared library (the same flags as the AVX2 kernels of the
build: -mavx2 -mfma -mf16c) behind a C shim; on AVX-512 CPUs also
kquant_avx512.cpp and q8k_quantize_avx512.cpp (the AVX-512 level's kernels
and quantizer). Per type, N random weight rows
(random block bytes, f16 scales in [0.001, 0.05]) against N random activation
rows of 1..4 blocks: the Q8_K bytes and every dot product must be identical.
Also Q5_0, Q5_1 and IQ4_NL (one row, 1..11 blocks) against ggml_vec_dot_*
on ggml's own Q8_0 / Q8_1 activations.

Usage: python3 tools/check_kquants_vs_ggml.py [--n 2000] [--seed S] [--ggml-lib-dir DIR]
Exit status 1 on any mismatch. Results: docs/KQUANTS.md.
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
#include "backend/cpu/kquant_kernels.h"
using namespace llm;
extern "C" void shim_q8k(const float* x, long n, signed char* q, float* d, short* bs) {
  qmm::QuantizeRowQ8K(x, n, reinterpret_cast<int8_t*>(q), d, reinterpret_cast<int16_t*>(bs));
}
extern "C" float shim_dot(int type, const void* w, long n, const signed char* q, const float* d,
                          const short* bs) {
  qmm::Acts a;
  a.n_rows = 1;
  a.n_in = n;
  a.kq = reinterpret_cast<const int8_t*>(q);
  a.kd = d;
  a.kbsum = reinterpret_cast<const int16_t*>(bs);
  a.n_kblocks = n / 256;
  float y = 0;
  qmm::KQuantAvx2Kernel(static_cast<DType>(type))(w, 0, 0, 1, a, &y, 1, nullptr);
  return y;
}
// The AVX-512 level (kquant_avx512.cpp, q8k_quantize_avx512.cpp; only called
// when the CPU has it): the quantizer, and the kernel of types that have one
// (0 returned in *has for the others).
extern "C" void shim_q8k512(const float* x, long n, signed char* q, float* d, short* bs) {
  qmm::QuantizeRowQ8KAvx512(x, n, reinterpret_cast<int8_t*>(q), d, reinterpret_cast<int16_t*>(bs));
}
extern "C" void shim_q8k2(const float* x, long n, signed char* q, float* d, short* bs) {
  qmm::QuantizeRowQ8KAvx2(x, n, reinterpret_cast<int8_t*>(q), d, reinterpret_cast<int16_t*>(bs));
}
extern "C" float shim_dot512(int type, const void* w, long n, const signed char* q, const float* d,
                             const short* bs, int* has) {
  qmm::Acts a;
  a.n_rows = 1;
  a.n_in = n;
  a.kq = reinterpret_cast<const int8_t*>(q);
  a.kd = d;
  a.kbsum = reinterpret_cast<const int16_t*>(bs);
  a.n_kblocks = n / 256;
  float y = 0;
  const qmm::Kernel k = qmm::KQuantAvx512Kernel(static_cast<DType>(type));
  *has = k != nullptr;
  if (k != nullptr) k(w, 0, 0, 1, a, &y, 1, nullptr);
  return y;
}
// One row of a 32-block type against q / ds activations (ds: f32 pairs d, s).
extern "C" float shim_dot32(int type, const void* w, long n, const signed char* q, const float* ds) {
  qmm::Acts a;
  a.n_rows = 1;
  a.n_in = n;
  a.q = reinterpret_cast<const int8_t*>(q);
  a.ds = ds;
  a.n_blocks = n / 32;
  float y = 0;
  qmm::KQuantAvx2Kernel(static_cast<DType>(type))(w, 0, 0, 1, a, &y, 1, nullptr);
  return y;
}
'''

# 32-element types: GGML type id -> (ggml name, block bytes, f16 scale offsets,
# activation type: 8 = Q8_0, 9 = Q8_1)
TYPES32 = {6: ("q5_0", 22, [0], 8), 7: ("q5_1", 24, [0, 2], 9), 20: ("iq4_nl", 18, [0], 8)}

# GGML type id -> (ggml name, block bytes, byte offsets of the f16 scales)
TYPES = {10: ("q2_K", 84, [80, 82]), 11: ("q3_K", 110, [108]), 12: ("q4_K", 144, [0, 2]),
         13: ("q5_K", 176, [0, 2]), 14: ("q6_K", 210, [208]), 23: ("iq4_xs", 136, [0])}


def build_shim(out_dir):
    src = os.path.join(out_dir, "shim.cpp")
    with open(src, "w") as f:
        f.write(SHIM)
    inc = ["-I" + os.path.join(ROOT, "src"), "-I" + ROOT]
    cpu = os.path.join(ROOT, "src", "backend", "cpu")
    objs = []
    for name in ("kquant_avx2", "q8k_quantize_avx2"):
        objs.append(os.path.join(out_dir, name + ".o"))
        subprocess.check_call(["g++", "-O2", "-std=c++17", "-fPIC", "-mavx2", "-mfma", "-mf16c", *inc, "-c",
                               os.path.join(cpu, name + ".cpp"), "-o", objs[-1]])
    for name in ("kquant_avx512", "q8k_quantize_avx512"):  # the *_avx512.cpp flags of the build
        objs.append(os.path.join(out_dir, name + ".o"))
        subprocess.check_call(["g++", "-O2", "-std=c++17", "-fPIC", "-mavx512f", "-mavx512bw", "-mavx512dq",
                               "-mavx512vl", "-mavx512vnni", "-mavx512bf16", "-mavx2", "-mfma", "-mf16c",
                               *inc, "-c", os.path.join(cpu, name + ".cpp"), "-o", objs[-1]])
    lib = os.path.join(out_dir, "libshim.so")
    subprocess.check_call(["g++", "-O2", "-std=c++17", "-fPIC", "-shared", *inc, src,
                           os.path.join(cpu, "kquant_scalar.cpp"), *objs, "-o", lib])
    return ctypes.CDLL(lib)


def ggml_dir(arg):
    if arg:
        return arg
    import llama_cpp
    return os.path.join(os.path.dirname(llama_cpp.__file__), "lib")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="cases per type")
    ap.add_argument("--seed", type=int, default=int.from_bytes(os.urandom(4), "little"))
    ap.add_argument("--ggml-lib-dir", default=None)
    args = ap.parse_args()
    d = ggml_dir(args.ggml_lib_dir)
    ctypes.CDLL(os.path.join(d, "libggml-base.so"), mode=ctypes.RTLD_GLOBAL)
    ggml = ctypes.CDLL(os.path.join(d, "libggml-cpu.so"))
    ggml.ggml_cpu_init()  # fills ggml's f16 -> f32 table
    with tempfile.TemporaryDirectory() as tmp:
        ours = build_shim(tmp)
        ours.shim_dot.restype = ctypes.c_float
        ours.shim_dot512.restype = ctypes.c_float
        # The AVX-512 level's quantizer and kernels too, where the CPU has it.
        flags = open("/proc/cpuinfo").read()
        avx512 = all(f in flags for f in ("avx512bw", "avx512vl", "avx512_vnni", "avx512dq"))
        ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)
        rng = np.random.default_rng(args.seed)
        print(f"seed {args.seed}, {args.n} cases per type, ggml from {d}")
        bad_total = 0
        for t, (name, bb, offs) in TYPES.items():
            vec_dot = getattr(ggml, f"ggml_vec_dot_{name}_q8_K")
            bad_q = bad_q2 = bad_dot = bad_q512 = bad_dot512 = 0
            has512 = False
            for _ in range(args.n):
                nb = int(rng.integers(1, 5))
                n = 256 * nb
                w = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
                for o in offs:
                    w[:, o:o + 2] = rng.uniform(0.001, 0.05, nb).astype(np.float16).view(np.uint8).reshape(nb, 2)
                x = (rng.standard_normal(n) * rng.uniform(0.01, 10)).astype(np.float32)
                blocks = np.zeros((nb, 292), np.uint8)  # ggml's block_q8_K: f32 d, i8 qs[256], i16 bsums[16]
                ggml.quantize_row_q8_K(ptr(x), ptr(blocks), ctypes.c_int64(n))
                gd = blocks[:, :4].copy().view(np.float32).reshape(-1)
                gq = blocks[:, 4:260].copy().view(np.int8).reshape(-1)
                gbs = blocks[:, 260:].copy().view(np.int16).reshape(-1)
                q = np.zeros(n, np.int8)
                qd = np.zeros(nb, np.float32)
                qbs = np.zeros(16 * nb, np.int16)
                ours.shim_q8k(ptr(x), ctypes.c_long(n), ptr(q), ptr(qd), ptr(qbs))
                if not (gd.tobytes() == qd.tobytes() and np.array_equal(gq, q) and np.array_equal(gbs, qbs)):
                    bad_q += 1
                ours.shim_q8k2(ptr(x), ctypes.c_long(n), ptr(q), ptr(qd), ptr(qbs))
                if not (gd.tobytes() == qd.tobytes() and np.array_equal(gq, q) and np.array_equal(gbs, qbs)):
                    bad_q2 += 1
                s = np.zeros(1, np.float32)
                vec_dot(ctypes.c_int(n), ptr(s), ctypes.c_size_t(0), ptr(w), ctypes.c_size_t(0), ptr(blocks),
                        ctypes.c_size_t(0), ctypes.c_int(1))
                mine = np.float32(ours.shim_dot(t, ptr(w), ctypes.c_long(n), ptr(gq), ptr(gd), ptr(gbs)))
                if mine.tobytes() != s.tobytes():
                    bad_dot += 1
                if avx512:
                    ours.shim_q8k512(ptr(x), ctypes.c_long(n), ptr(q), ptr(qd), ptr(qbs))
                    if not (gd.tobytes() == qd.tobytes() and np.array_equal(gq, q) and np.array_equal(gbs, qbs)):
                        bad_q512 += 1
                    has = ctypes.c_int(0)
                    mine = np.float32(ours.shim_dot512(t, ptr(w), ctypes.c_long(n), ptr(gq), ptr(gd), ptr(gbs),
                                                       ctypes.byref(has)))
                    has512 = bool(has.value)
                    if has512 and mine.tobytes() != s.tobytes():
                        bad_dot512 += 1
            print(f"{name:7s} Q8_K quantization mismatches {bad_q}/{args.n} (AVX2 quantizer {bad_q2}/{args.n}), "
                  f"vec_dot mismatches {bad_dot}/{args.n}")
            if avx512:
                print(f"{'':7s} AVX-512: quantization mismatches {bad_q512}/{args.n}, "
                      + (f"vec_dot mismatches {bad_dot512}/{args.n}" if has512 else "(no own kernel: AVX2's)"))
            bad_total += bad_q + bad_q2 + bad_dot + bad_q512 + bad_dot512
        # Q5_0 / Q5_1 / IQ4_NL, one row (ggml_vec_dot_*_q8_0 / _q8_1), on
        # ggml's own Q8_0 / Q8_1 activations (odd block counts included: the
        # IQ4_NL scalar tail).
        ours.shim_dot32.restype = ctypes.c_float
        for t, (name, bb, offs, act) in TYPES32.items():
            act_name = "q8_0" if act == 8 else "q8_1"
            vec_dot = getattr(ggml, f"ggml_vec_dot_{name}_{act_name}")
            quantize = getattr(ggml, f"quantize_row_{act_name}")
            act_bytes = 34 if act == 8 else 36
            bad_dot = 0
            for _ in range(args.n):
                nb = int(rng.integers(1, 12))
                n = 32 * nb
                w = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
                for i, o in enumerate(offs):
                    lo, hi = (0.001, 0.05) if i == 0 else (-0.3, 0.3)
                    w[:, o:o + 2] = rng.uniform(lo, hi, nb).astype(np.float16).view(np.uint8).reshape(nb, 2)
                x = (rng.standard_normal(n) * rng.uniform(0.01, 10)).astype(np.float32)
                blocks = np.zeros((nb, act_bytes), np.uint8)
                quantize(ptr(x), ptr(blocks), ctypes.c_int64(n))
                d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32).reshape(-1)
                sm = (blocks[:, 2:4].copy().view(np.float16).astype(np.float32).reshape(-1) if act == 9
                      else np.zeros(nb, np.float32))
                q = blocks[:, act_bytes - 32:].copy().view(np.int8).reshape(-1)
                ds = np.stack([d, sm], axis=1).astype(np.float32).reshape(-1)
                s = np.zeros(1, np.float32)
                vec_dot(ctypes.c_int(n), ptr(s), ctypes.c_size_t(0), ptr(w), ctypes.c_size_t(0), ptr(blocks),
                        ctypes.c_size_t(0), ctypes.c_int(1))
                mine = np.float32(ours.shim_dot32(t, ptr(w), ctypes.c_long(n), ptr(q), ptr(ds)))
                if mine.tobytes() != s.tobytes():
                    bad_dot += 1
            print(f"{name:7s} vec_dot (one row, ggml's {act_name} activations) mismatches {bad_dot}/{args.n}")
            bad_total += bad_dot
        return 1 if bad_total else 0


if __name__ == "__main__":
    sys.exit(main())
