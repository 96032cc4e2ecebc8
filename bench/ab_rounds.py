#!/usr/bin/env python3
"""Interleaved A/B rounds of `llm bench` for two builds of libllm.

Each round runs every measurement with build A and build B, alternating which
goes first, so that slow phases of a shared, noisy machine hit both alike.
Prints the median of each figure per build, the median of the per-round B/A
ratios and their spread (min..max).

  python3 bench/ab_rounds.py --a OLD_BUILD/llm --b NEW_BUILD/llm \\
      --model M.gguf [--model R.gguf] --rounds 5 [--threads 2]

A and B may be one binary run with different environments, e.g. the thread
pool against an always-spinning one:

  python3 bench/ab_rounds.py --a build/llm --b build/llm \\
      --b-env LLM_CPU_POOL_SPIN=1000000000 --figures tg --model M.gguf

Figures per model: prefill (pp, -p 512) and decode (tg, -n 128) tokens/s of
one session; aggregate decode tokens/s of 1 and 16 concurrent sessions
(--sessions 1,16, -n 32). --figures pp,tg,sessions picks some of them.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys


def run(binary, env, args):
    out = subprocess.run([binary, "bench", *args], env=env,
                         capture_output=True, text=True, check=True)
    return out.stdout + out.stderr


def measure(binary, env, model, threads, pp, tg, sessions_tokens, wanted):
    figures = {}
    if "pp" in wanted or "tg" in wanted:
        text = run(binary, env, ["-m", model, "-p", str(pp if "pp" in wanted else 1),
                                 "-n", str(tg if "tg" in wanted else 1), "-r", "1", "-t", str(threads)])
        if "pp" in wanted:
            figures["pp%d" % pp] = float(
                re.search(r"prefill \d+ tokens: ([\d.]+) tokens/s", text).group(1))
        if "tg" in wanted:
            figures["tg%d" % tg] = float(
                re.search(r"decode \d+ tokens: ([\d.]+) tokens/s", text).group(1))
    if "sessions" in wanted:
        text = run(binary, env, ["-m", model, "--sessions", "1,16", "-n", str(sessions_tokens),
                                 "-r", "1", "-t", str(threads)])
        for n in (1, 16):
            m = re.search(r"^\| %d \| ([\d.]+) \|" % n, text, re.M)
            figures["%d sessions" % n] = float(m.group(1))
    return figures


def environment(assignments):
    env = dict(os.environ)
    for a in assignments:
        name, sep, value = a.partition("=")
        if not sep or not name:
            raise SystemExit("environment setting %r is not NAME=VALUE" % a)
        env[name] = value
    return env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--a", required=True, help="llm binary of build A (the baseline)")
    ap.add_argument("--b", required=True, help="llm binary of build B")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--session-tokens", type=int, default=32)
    ap.add_argument("--a-env", action="append", default=[], metavar="NAME=VALUE",
                    help="environment variable for build A's runs (repeatable)")
    ap.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE",
                    help="environment variable for build B's runs (repeatable)")
    ap.add_argument("--figures", default="pp,tg,sessions",
                    help="comma-separated subset of pp, tg, sessions")
    args = ap.parse_args()
    wanted = set(args.figures.split(","))
    if not wanted or not wanted <= {"pp", "tg", "sessions"}:
        raise SystemExit("--figures takes a comma-separated subset of pp, tg, sessions")
    envs = {"A": environment(args.a_env), "B": environment(args.b_env)}

    results = {}  # (model, build, figure) -> [values per round]
    for r in range(args.rounds):
        order = [("A", args.a), ("B", args.b)] if r % 2 == 0 else [("B", args.b), ("A", args.a)]
        for model in args.model:
            for name, binary in order:
                figs = measure(binary, envs[name], model, args.threads, args.pp, args.tg,
                               args.session_tokens, wanted)
                for fig, value in figs.items():
                    results.setdefault((model, name, fig), []).append(value)
                print("round %d %s %s: %s" % (r + 1, name, model.rsplit("/", 1)[-1],
                                             ", ".join("%s %.1f" % kv for kv in figs.items())),
                      file=sys.stderr, flush=True)

    print("| model | figure | A median tok/s | B median tok/s | B/A median (min..max) |")
    print("|---|---|---:|---:|---:|")
    for model in args.model:
        figs = [k[2] for k in results if k[0] == model and k[1] == "A"]
        for fig in figs:
            a = results[(model, "A", fig)]
            b = results[(model, "B", fig)]
            ratios = [y / x for x, y in zip(a, b)]
            print("| %s | %s | %.1f | %.1f | %.3f (%.3f..%.3f) |" % (
                model.rsplit("/", 1)[-1], fig, statistics.median(a), statistics.median(b),
                statistics.median(ratios), min(ratios), max(ratios)))


if __name__ == "__main__":
    main()
