#!/usr/bin/env python3
"""Write small GGUF files with the `gguf` package's GGUFWriter, used by
tests/format/gguf_test.cpp as fixtures from an independent writer.

  all_types_v3.gguf  one metadata key per GGUF value type (all 13), a string
                     array, an array of arrays; tensors (numpy shape -> GGUF dims):
                       t.f32  F32  (2, 3)  values 0.5 * arange(6)
                       t.f16  F16  (4, 8)  values arange(32) / 8
                       t.q8_0 Q8_0 (2, 64) raw blocks from gguf.quants.quantize
  align64.gguf       general.alignment = 64, tensors a (F32, (5,)) and b (F32, (3, 7))

Usage: python3 tools/make_format_fixtures.py [OUT_DIR]  (default tests/data/format)
"""
import os
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter, quants


def all_types(path):
    w = GGUFWriter(path, "llama")  # also writes general.architecture = "llama"
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 1.5)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo ▁world")
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**62))
    w.add_float64("test.f64", -2.25)
    w.add_array("test.arr_i32", [1, -2, 3])
    w.add_key_value("test.arr_f32", [0.5, -1.25], GGUFValueType.ARRAY, sub_type=GGUFValueType.FLOAT32)
    w.add_array("test.arr_str", ["a", "", "ccc"])
    w.add_key_value("test.arr_arr", [[1, 2], [3]], GGUFValueType.ARRAY, sub_type=GGUFValueType.ARRAY)
    w.add_tensor("t.f32", (0.5 * np.arange(6, dtype=np.float32)).reshape(2, 3))
    w.add_tensor("t.f16", (np.arange(32, dtype=np.float32) / 8).astype(np.float16).reshape(4, 8))
    x = np.sin(np.arange(128, dtype=np.float32)).reshape(2, 64)
    q = quants.quantize(x, GGMLQuantizationType.Q8_0)
    w.add_tensor("t.q8_0", q, raw_dtype=GGMLQuantizationType.Q8_0)
    write(w)


def align64(path):
    w = GGUFWriter(path, "llama")
    w.add_custom_alignment(64)
    w.add_tensor("a", np.arange(5, dtype=np.float32))
    w.add_tensor("b", np.arange(21, dtype=np.float32).reshape(3, 7))
    write(w)


def write(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "format")
    os.makedirs(out, exist_ok=True)
    all_types(os.path.join(out, "all_types_v3.gguf"))
    align64(os.path.join(out, "align64.gguf"))


if __name__ == "__main__":
    main()
