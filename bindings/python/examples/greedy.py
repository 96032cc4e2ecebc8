#!/usr/bin/env python3
"""Cross-language agreement program (tests/bindings/same_tokens.sh):
greedy.py "<prompt>" loads $LLM_MODEL_PATH, tokenizes the prompt
(add_special=1, parse_special=0), decodes 16 tokens greedily and prints their
ids space-separated on one line."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import libllm  # noqa: E402


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: greedy.py PROMPT")
    with libllm.Model(os.environ["LLM_MODEL_PATH"]) as model, \
            model.session(temperature=0.0) as session:
        session.prefill(model.tokenize(sys.argv[1], add_special=True, parse_special=False))
        print(" ".join(str(session.decode()) for _ in range(16)))


if __name__ == "__main__":
    main()
