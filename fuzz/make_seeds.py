#!/usr/bin/env python3
"""Write the small seed corpora of the fuzz targets into fuzz/corpus/<target>/.

model_load_fuzzer seeds are complete but tiny llama models (each < 40 KB):
vocab 300, n_embd 32, n_ff 64, 1-2 layers, 2 heads (1 KV head), random
weights, made with the `gguf` PyPI package:
  spm-q8_0.gguf     SentencePiece ("llama") vocab, Q8_0 matrices, tied output
  bpe-f16.gguf      byte-level BPE ("gpt2", pre "smollm") vocab with merges,
                    F16 matrices, separate output.weight, chat template
  spm-q4_0-2l.gguf  2 layers, Q4_0 matrices, GQA 2/1
gguf_parse_fuzzer seeds: the format fixtures in tests/data/format plus the
model seeds. tokenizer_fuzzer / chat_format_fuzzer seeds: short texts in the
input layouts their sources describe.

Usage: python3 fuzz/make_seeds.py   (from the repository root; deterministic)
"""
import os
import shutil
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "fuzz", "corpus")

N_VOCAB = 300
N_EMBD = 32
N_FF = 64


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def spm_vocab():
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    letters = "etaoinshrdlucmfwyp"
    pieces = ["▁"] + ["▁" + c for c in letters] + list(letters)
    for p in pieces:
        if len(tokens) == N_VOCAB:
            break
        tokens.append(p)
        types.append(gguf.TokenType.NORMAL)
    while len(tokens) < N_VOCAB:
        tokens.append("▁t" + "e" * (len(tokens) - 290))
        types.append(gguf.TokenType.NORMAL)
    assert len(set(tokens)) == N_VOCAB
    scores = [0.0] * 259 + [-float(i) for i in range(N_VOCAB - 259)]
    return tokens, scores, [int(t) for t in types]


def bpe_vocab():
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    types = [int(gguf.TokenType.NORMAL)] * 256
    merges = []
    words = ["th", "he", "in", "er", "an", "Ġt", "Ġa", "on", "re", "at", "the", "Ġthe", "ing", "Ġin", "and"]
    for w in words:
        # split a 2- or 3-symbol word into an existing prefix and the last symbol
        for cut in range(len(w) - 1, 0, -1):
            left, right = w[:cut], w[cut:]
            if left in tokens and right in tokens:
                merges.append(left + " " + right)
                tokens.append(w)
                types.append(int(gguf.TokenType.NORMAL))
                break
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    for s in specials:
        tokens.append(s)
        types.append(int(gguf.TokenType.CONTROL))
    i = 0
    while len(tokens) < N_VOCAB:
        tokens.append("<extra_%d>" % i)
        types.append(int(gguf.TokenType.USER_DEFINED))
        i += 1
    assert len(set(tokens)) == N_VOCAB
    return tokens, types, merges


def write_model(path, vocab_kind, qtype, n_layer, n_head, n_head_kv, tied, seed):
    rng = np.random.default_rng(seed)
    wr = gguf.GGUFWriter(path, "llama")
    wr.add_name(os.path.basename(path))
    wr.add_context_length(64)
    wr.add_embedding_length(N_EMBD)
    wr.add_block_count(n_layer)
    wr.add_feed_forward_length(N_FF)
    wr.add_head_count(n_head)
    wr.add_head_count_kv(n_head_kv)
    wr.add_rope_dimension_count(N_EMBD // n_head)
    wr.add_rope_freq_base(10000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_vocab_size(N_VOCAB)
    if vocab_kind == "spm":
        tokens, scores, types = spm_vocab()
        wr.add_tokenizer_model("llama")
        wr.add_token_list(tokens)
        wr.add_token_scores(scores)
        wr.add_token_types(types)
        wr.add_unk_token_id(0)
        wr.add_bos_token_id(1)
        wr.add_eos_token_id(2)
        wr.add_add_bos_token(True)
        wr.add_add_eos_token(False)
    else:
        tokens, types, merges = bpe_vocab()
        wr.add_tokenizer_model("gpt2")
        wr.add_tokenizer_pre("smollm")
        wr.add_token_list(tokens)
        wr.add_token_types(types)
        wr.add_token_merges(merges)
        wr.add_bos_token_id(tokens.index("<|im_start|>"))
        wr.add_eos_token_id(tokens.index("<|im_end|>"))
        wr.add_add_bos_token(False)
        wr.add_chat_template(
            "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
            "{{ '<|im_start|>system\\nYou are tiny.<|im_end|>\\n' }}{% endif %}"
            "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
            "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")

    def mat(rows, cols):
        x = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float32)
        if qtype == Q.F16:
            return x.astype(np.float16), None
        return quants.quantize(x, qtype), qtype

    def norm():
        return (1.0 + rng.standard_normal(N_EMBD) * 0.05).astype(np.float32)

    head_dim = N_EMBD // n_head
    kv_dim = n_head_kv * head_dim
    tensors = {"token_embd.weight": mat(N_VOCAB, N_EMBD)}
    for i in range(n_layer):
        p = "blk.%d." % i
        tensors[p + "attn_norm.weight"] = (norm(), None)
        tensors[p + "attn_q.weight"] = mat(N_EMBD, N_EMBD)
        tensors[p + "attn_k.weight"] = mat(kv_dim, N_EMBD)
        tensors[p + "attn_v.weight"] = mat(kv_dim, N_EMBD)
        tensors[p + "attn_output.weight"] = mat(N_EMBD, N_EMBD)
        tensors[p + "ffn_norm.weight"] = (norm(), None)
        tensors[p + "ffn_gate.weight"] = mat(N_FF, N_EMBD)
        tensors[p + "ffn_up.weight"] = mat(N_FF, N_EMBD)
        tensors[p + "ffn_down.weight"] = mat(N_EMBD, N_FF)
    tensors["output_norm.weight"] = (norm(), None)
    if not tied:
        tensors["output.weight"] = mat(N_VOCAB, N_EMBD)
    for name, (arr, raw) in tensors.items():
        if raw is None:
            wr.add_tensor(name, arr)
        else:
            wr.add_tensor(name, arr, raw_dtype=raw)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    d = os.path.join(CORPUS, "model_load_fuzzer")
    os.makedirs(d, exist_ok=True)
    write_model(os.path.join(d, "spm-q8_0.gguf"), "spm", Q.Q8_0, 1, 2, 1, True, 1)
    write_model(os.path.join(d, "bpe-f16.gguf"), "bpe", Q.F16, 1, 2, 2, False, 2)
    write_model(os.path.join(d, "spm-q4_0-2l.gguf"), "spm", Q.Q4_0, 2, 2, 1, True, 3)
    for f in sorted(os.listdir(d)):
        size = os.path.getsize(os.path.join(d, f))
        assert size < 100_000, (f, size)
        print(f, size)

    g = os.path.join(CORPUS, "gguf_parse_fuzzer")
    os.makedirs(g, exist_ok=True)
    for f in ("align64.gguf", "all_types_v3.gguf"):
        shutil.copy(os.path.join(ROOT, "tests", "data", "format", f), os.path.join(g, f))
    shutil.copy(os.path.join(d, "spm-q8_0.gguf"), os.path.join(g, "spm-q8_0.gguf"))
    with open(os.path.join(d, "bpe-f16.gguf"), "rb") as f:
        write("gguf_parse_fuzzer", "bpe-f16-head.gguf", f.read()[:8192])  # truncated: metadata only

    texts = [b"Hello world", b"Hello, y'all! How are you \xf0\x9f\x98\x81 ?",
             b"  leading and trailing  spaces\n\n\ttabs", b"3333 1234567 numbers 1.5e10",
             "中文 日本語 한국어 Ελληνικά".encode(), b"invalid \xff\xfe utf-8 \xc3 \xe2\x82",
             b"<s> </s> <|endoftext|> <|im_start|>user<|im_end|>", b"don't I'll we've 's 'S",
             b"\x00\x01 control \x7f", "🦙🦙 emoji ❤️ zwj 👨‍👩‍👧".encode()]
    for i, t in enumerate(texts):
        for flags in (0, 1 | 4, 2 | 8 | 16, 3 | 4 | 8):
            write("tokenizer_fuzzer", "text-%02d-%02x" % (i, flags), bytes([flags]) + t)

    chat = {
        "chatml": b"\x01<|im_start|>system\\nYou are a helpful AI assistant named SmolLM<|im_end|>\x00\x00You are terse.\x00\x01Hi!\x00\x02Hello.\x00\x01Bye",
        "llama3": b"\x03{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>' }}\x00\x01  spaced  \x00\x02 a \x00\x01x",
        "llama2": b"\x02[INST] <<SYS>>\x00\x00sys\x00\x01u1\x00\x02a1\x00\x01u2",
        "mistral": b"\x0f[INST]\x00\x01only user",
        "zephyr": b"\x01<|user|>\x00\x03tool\x01result\x00\x01q",
        "phi3": b"\x00<|user|><|end|>\x00\x00\x00\x01hi\x00\x02",
        "gemma": b"\x01<start_of_turn>\x00\x00sys\x00\x01\xe2\x80\x83 hi \xc2\xa0\x00\x02ok",
        "name": b"\x01gemma\x00\x01hi",
        "unknown": b"\x01{{ messages }}\x00\x01hi",
    }
    for name, data in chat.items():
        write("chat_format_fuzzer", name, data)


if __name__ == "__main__":
    sys.exit(main())
