#!/usr/bin/env python3
"""Generate dequantization goldens with the `gguf` Python package.

For each type, random blocks are built (partly by gguf.quants.quantize of
random floats, partly raw random bytes with sane finite f16 scales, so every
nibble / bit pattern occurs), then dequantized by gguf.quants.dequantize; the
C++ DequantizeRow must match the float32 output bit for bit
(tests/backend/dequantize_test.cpp).

Output: tests/data/dequant/<TYPE>.bin, little-endian:
  offset 0   char[4]  magic "DQG1"
  offset 4   u32      GGML type id (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 6 Q5_0,
                      7 Q5_1, 8 Q8_0, 10 Q2_K, 11 Q3_K, 12 Q4_K, 13 Q5_K,
                      14 Q6_K, 20 IQ4_NL, 23 IQ4_XS, 30 BF16)
  offset 8   u32      n_elements
  offset 12  u32      n_src_bytes (= n_elements / block_elems * block_bytes)
  offset 16  u8[n_src_bytes]       raw GGUF tensor bytes
  then       f32[n_elements]       expected gguf.quants.dequantize output
and tests/data/dequant/MANIFEST.txt with the package versions used.

Usage: python3 tools/gen_dequant_goldens.py [OUT_DIR]   (default tests/data/dequant)
"""
import importlib.metadata
import os
import struct
import sys

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

SEED = 20240601


def random_f16_scales(rng, n, lo=-2.0, hi=2.0):
    """Finite f16 scales, including a few zeros and subnormals."""
    s = rng.uniform(lo, hi, size=n).astype(np.float32) * np.float32(0.05)
    s[:: max(1, n // 5)] = 0.0
    s[1:: max(2, n // 4)] = np.float32(3e-6)  # f16 subnormal
    return s.astype(np.float16)


def random_half_bits(rng, n, bf16):
    """Random 16-bit patterns that are finite (no inf/NaN) as f16 or bf16."""
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    exp_mask = np.uint16(0x7F80 if bf16 else 0x7C00)
    bad = (bits & exp_mask) == exp_mask
    bits[bad] &= np.uint16(~(0x0400 if not bf16 else 0x0080) & 0xFFFF)  # clear one exponent bit
    return bits


def raw_blocks(rng, qtype, n_blocks):
    """Random block bytes with finite f16 scales placed per the GGML layout."""
    _, type_size = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint32).astype(np.uint8)
    if qtype in (T.Q4_0, T.Q8_0, T.Q5_0, T.IQ4_NL, T.IQ4_XS):  # d first
        b[:, 0:2] = random_f16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    elif qtype in (T.Q4_1, T.Q4_K, T.Q5_1, T.Q5_K):  # d, then m / dmin
        b[:, 0:2] = random_f16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
        b[:, 2:4] = random_f16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    elif qtype in (T.Q6_K, T.Q3_K):  # d is the last 2 bytes
        b[:, -2:] = random_f16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    elif qtype == T.Q2_K:  # d, dmin are the last 4 bytes
        b[:, -4:-2] = random_f16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
        b[:, -2:] = random_f16_scales(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    else:
        raise ValueError(qtype)
    return b.reshape(-1)


def make(qtype, rng):
    if qtype == T.F32:
        x = rng.standard_normal(1001).astype(np.float32) * np.float32(3.0)
        return x.view(np.uint8), x.size
    if qtype in (T.F16, T.BF16):
        bits = random_half_bits(rng, 1003, qtype == T.BF16)
        return bits.view(np.uint8), bits.size
    block_elems, _ = GGML_QUANT_SIZES[qtype]
    parts = []
    if qtype in (T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        # Blocks quantized from real-looking data (gguf's own quantizer).
        x = (rng.standard_normal(48 * block_elems) * 0.05).astype(np.float32)
        parts.append(quants.quantize(x.reshape(-1, block_elems), qtype).reshape(-1))
        parts.append(raw_blocks(rng, qtype, 48))
    else:  # K-quants, IQ4: gguf-py has no quantizer for them; random bytes cover all patterns
        parts.append(raw_blocks(rng, qtype, 16))
    raw = np.concatenate(parts).astype(np.uint8)
    _, type_size = GGML_QUANT_SIZES[qtype]
    n_elements = raw.size // type_size * block_elems
    return raw, n_elements


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "dequant")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    types = [T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q4_K, T.Q6_K,
             T.Q5_0, T.Q5_1, T.IQ4_NL, T.Q2_K, T.Q3_K, T.Q5_K, T.IQ4_XS]
    for qtype in types:
        raw, n_elements = make(qtype, rng)
        # dequantize() views raw uint8 bytes as the type itself (F32, F16 too).
        expected = quants.dequantize(raw, qtype)
        expected = np.asarray(expected, dtype=np.float32).reshape(-1)
        assert expected.size == n_elements, (qtype.name, expected.size, n_elements)
        assert np.all(np.isfinite(expected)), qtype.name
        with open(os.path.join(out_dir, f"{qtype.name}.bin"), "wb") as f:
            f.write(b"DQG1")
            f.write(struct.pack("<III", int(qtype), n_elements, raw.size))
            f.write(raw.tobytes())
            f.write(expected.astype("<f4").tobytes())
        print(f"{qtype.name}: {n_elements} elements, {raw.size} bytes")
    with open(os.path.join(out_dir, "MANIFEST.txt"), "w") as f:
        f.write("Generated by tools/gen_dequant_goldens.py (seed %d)\n" % SEED)
        f.write("gguf %s\nnumpy %s\n" % (importlib.metadata.version("gguf"), importlib.metadata.version("numpy")))
        f.write("Expected values are gguf.quants.dequantize() in float32.\n")


if __name__ == "__main__":
    main()
