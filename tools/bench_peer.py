#!/usr/bin/env python3
"""Peer numbers for BENCHMARKS.md: llama-cpp-python on the same model, same
prompt length, same number of generated tokens and threads as `llm bench`.

    python3 tools/bench_peer.py --model PATH [-p 128] [-n 64] [-r 3] [-t 2]

Prints prefill and decode tokens/s (median of the repeats) in the format of
`llm bench`, so the two can be read side by side. Greedy decoding from a
prompt of fixed token ids (the same ids `llm bench` uses).
"""
import argparse
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("-p", type=int, default=128, help="prompt tokens")
    ap.add_argument("-n", type=int, default=64, help="generated tokens")
    ap.add_argument("-r", type=int, default=3, help="repeats")
    ap.add_argument("-t", type=int, default=2, help="threads")
    args = ap.parse_args()

    import llama_cpp
    import llama_cpp.llama

    # As in tools/gen_teacher_goldens.py: no AMX/repacked buffers (they die
    # with SIGILL on VMs that report AMX without granting the tile state).
    default_params = llama_cpp.llama_model_default_params

    def params_without_extra_bufts():
        p = default_params()
        if hasattr(p, "use_extra_bufts"):
            p.use_extra_bufts = False
        return p

    llama_cpp.llama.llama_cpp.llama_model_default_params = params_without_extra_bufts

    llm = llama_cpp.Llama(model_path=args.model, n_ctx=args.p + args.n + 8, n_threads=args.t,
                          n_threads_batch=args.t, n_batch=512, verbose=False)
    n_vocab = llm.n_vocab()
    prompt = [(i * 7919 + 13) % n_vocab for i in range(args.p)]
    prefill, decode = [], []
    for _ in range(args.r):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        t1 = time.perf_counter()
        for _ in range(args.n):
            tok = int(llm.scores[llm.n_tokens - 1].argmax())
            llm.eval([tok])
        t2 = time.perf_counter()
        prefill.append(args.p / (t1 - t0))
        decode.append(args.n / (t2 - t1))
    print(f"peer: llama-cpp-python {llama_cpp.__version__}, {args.t} threads")
    print(f"prefill {args.p} tokens: {statistics.median(prefill):.1f} tokens/s (median of {args.r})")
    print(f"decode {args.n} tokens: {statistics.median(decode):.1f} tokens/s (median of {args.r})")


if __name__ == "__main__":
    main()
