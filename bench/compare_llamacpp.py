#!/usr/bin/env python3
"""Interleaved rounds of libllm's `llm bench` and llama.cpp's `llama-bench`
on the same GGUF files; prints medians, libllm / llama.cpp ratios and their
spread. Normally run through bench/compare_llamacpp.sh, which builds
llama-bench.

Per round and file, both engines run once, alternating which goes first, so
that slow phases of a shared, noisy machine hit both alike:
  llm bench -m F -p P -n N -t T -r 2      (prefill P ids, then decode N
                                           tokens greedily; median of 2
                                           repeats = the faster, the first
                                           doubling as warm-up)
  llama-bench -m F -p P -n N -t T -fa off -r 1 -o json
                                          (pp P and tg N as separate tests,
                                           each after llama-bench's own
                                           warm-up run)
Differences that remain, both against libllm: llm bench's decode starts
after the P-token prompt (attention over P..P+N positions) and samples
greedily over the vocabulary each token; llama-bench's tg starts from an
empty context and does not sample.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def run_llm(binary, model, threads, pp, tg, reps):
    out = subprocess.run([binary, "bench", "-m", model, "-p", str(pp), "-n", str(tg), "-r", str(reps),
                          "-t", str(threads)], capture_output=True, text=True)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        raise SystemExit("llm bench failed on %s:\n%s" % (model, text))
    return {
        "pp": float(re.search(r"prefill \d+ tokens: ([\d.]+) tokens/s", text).group(1)),
        "tg": float(re.search(r"decode \d+ tokens: ([\d.]+) tokens/s", text).group(1)),
    }


def run_llama_bench(binary, model, threads, pp, tg):
    out = subprocess.run([binary, "-m", model, "-p", str(pp), "-n", str(tg), "-t", str(threads), "-fa", "off",
                          "-r", "1", "-o", "json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("llama-bench failed on %s:\n%s%s" % (model, out.stdout, out.stderr))
    figures = {}
    for test in json.loads(out.stdout):
        if test["n_prompt"] > 0 and test["n_gen"] == 0:
            figures["pp"] = float(test["avg_ts"])
        elif test["n_gen"] > 0 and test["n_prompt"] == 0:
            figures["tg"] = float(test["avg_ts"])
    if set(figures) != {"pp", "tg"}:
        raise SystemExit("llama-bench output without pp and tg on %s:\n%s" % (model, out.stdout))
    return figures


def spread(values):
    return "%.2f..%.2f" % (min(values), max(values))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llm", required=True, help="libllm CLI")
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--llm-reps", type=int, default=2)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    args = ap.parse_args()

    results = {}  # (model, engine, figure) -> [value per round]
    for r in range(args.rounds):
        engines = ["libllm", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "libllm"]
        for model in args.model:
            for engine in engines:
                if engine == "libllm":
                    figs = run_llm(args.llm, model, args.threads, args.p, args.n, args.llm_reps)
                else:
                    figs = run_llama_bench(args.llama_bench, model, args.threads, args.p, args.n)
                for fig, value in figs.items():
                    results.setdefault((model, engine, fig), []).append(value)
                print("round %d %-9s %s: pp%d %.1f, tg%d %.1f tokens/s" % (
                    r + 1, engine, os.path.basename(model), args.p, figs["pp"], args.n, figs["tg"]),
                    file=sys.stderr, flush=True)

    pp, tg = "pp%d" % args.p, "tg%d" % args.n
    print("%d interleaved rounds, %d threads; tokens/s medians; ratio = median of per-round "
          "libllm / llama.cpp (min..max)" % (args.rounds, args.threads))
    print()
    print("| file | %s libllm | %s llama.cpp | **%s ratio** | %s libllm | %s llama.cpp | **%s ratio** |" % (
        pp, pp, pp, tg, tg, tg))
    print("|---|---:|---:|---:|---:|---:|---:|")
    for model in args.model:
        cells = []
        for fig in ("pp", "tg"):
            ours = results[(model, "libllm", fig)]
            theirs = results[(model, "llama.cpp", fig)]
            ratios = [a / b for a, b in zip(ours, theirs)]
            cells.append("%.1f | %.1f | **%.2f×** (%s)" % (statistics.median(ours), statistics.median(theirs),
                                                         statistics.median(ratios), spread(ratios)))
        print("| %s | %s |" % (os.path.basename(model), " | ".join(cells)))


if __name__ == "__main__":
    main()
