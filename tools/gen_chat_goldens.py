#!/usr/bin/env python3
"""Render chat-template goldens for tests/tokenizer/chat_template_test.cpp.

The templates in tests/data/chat/templates/*.jinja are the Jinja texts the
model families ship in their tokenizer_config.json (provenance of each file:
tests/data/chat/README.md). They are rendered here with jinja2 the way
Hugging Face transformers does (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, the loopcontrols extension, the global raise_exception, and
bos_token / eos_token / add_generation_prompt as variables), which is an
implementation independent of our C++ renderer in
src/tokenizer/chat_template.cpp.

Template variables: a case passes `date_string` (Llama 3.1/3.2) or
`enable_thinking` (Qwen3) only where its "variables" say so; otherwise the
variable is undefined and the template's own default applies (Llama 3.x:
"26 Jul 2024"; Qwen3: thinking on). transformers also defines the global
`strftime_now`, which makes Llama 3.2's template default to today's date; we
deliberately do not define it, so goldens do not depend on the day they were
made (the C ABI documents the same default and lets callers pass a date).

The templates in tests/data/chat/templates/unsupported/ are real templates of
other families (or of these families with features we do not render): the
test checks that each of them is reported unsupported.

Usage:
  python3 tools/gen_chat_goldens.py            # (re)writes tests/data/chat/goldens.json.gz
  python3 tools/gen_chat_goldens.py --extract-smollm2 MODEL.gguf
"""
import argparse
import gzip
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "chat")
TEMPLATES = os.path.join(DATA, "templates")
UNSUPPORTED = os.path.join(TEMPLATES, "unsupported")

STANDARD_ROLES = {"system", "user", "assistant"}
QWEN_ROLES = STANDARD_ROLES | {"tool"}

# Variable grids: each entry is one set of variables passed to the template
# ({} = none passed, the template's default).
NO_VARS = [{}]
DATE_VARS = [{}, {"date_string": "02 Dec 2026"}, {"date_string": ""}]
THINKING_VARS = [{}, {"enable_thinking": True}, {"enable_thinking": False}]

# template file -> (our built-in name, bos_token, eos_token, default system
# prompt our detection must find, roles our renderer accepts (None: any),
# variable grid). Token texts are the families' HF values.
FAMILIES = {
    "chatml": ("chatml", "", "<|im_end|>", "", None, NO_VARS),
    "qwen2": ("chatml", "", "<|im_end|>", "You are a helpful assistant.", None, NO_VARS),
    "smollm2": ("chatml", "<|im_start|>", "<|im_end|>",
                "You are a helpful AI assistant named SmolLM, trained by Hugging Face", None,
                NO_VARS),
    "llama2": ("llama2", "<s>", "</s>", "", STANDARD_ROLES, NO_VARS),
    "llama3": ("llama3", "<|begin_of_text|>", "<|eot_id|>", "", STANDARD_ROLES, NO_VARS),
    "llama3.1": ("llama3.1", "<|begin_of_text|>", "<|eot_id|>", "", STANDARD_ROLES, DATE_VARS),
    "llama3.2": ("llama3.2", "<|begin_of_text|>", "<|eot_id|>", "", STANDARD_ROLES, DATE_VARS),
    "qwen2.5": ("qwen2.5", "", "<|im_end|>",
                "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", QWEN_ROLES,
                NO_VARS),
    # Xiaomi MiMo-VL: Qwen2.5's template with another default system prompt.
    "mimo-vl": ("qwen2.5", "", "<|im_end|>", "You are MiMo, an AI assistant developed by Xiaomi.",
                QWEN_ROLES, NO_VARS),
    "qwen3": ("qwen3", "", "<|im_end|>", "", QWEN_ROLES, THINKING_VARS),
    "mistral": ("mistral", "<s>", "</s>", "", STANDARD_ROLES, NO_VARS),
    "mistral-v3": ("mistral-v3", "<s>", "</s>", "", STANDARD_ROLES, NO_VARS),
    "mistral-v3-tekken": ("mistral-v3-tekken", "<s>", "</s>", "", STANDARD_ROLES, NO_VARS),
    "zephyr": ("zephyr", "<s>", "</s>", "", STANDARD_ROLES, NO_VARS),
    "phi3": ("phi3", "<s>", "<|endoftext|>", "", STANDARD_ROLES, NO_VARS),
    "phi3_mini_4k_legacy": ("phi3-legacy", "<s>", "<|endoftext|>", "", STANDARD_ROLES, NO_VARS),
    "gemma": ("gemma", "<bos>", "<eos>", "", STANDARD_ROLES, NO_VARS),
    "gemma2": ("gemma2", "<bos>", "<eos>", "", STANDARD_ROLES, NO_VARS),
    "gemma_v1_nosystem": ("gemma2", "<bos>", "<eos>", "", STANDARD_ROLES, NO_VARS),
}

TRICKY = "look: <|im_start|>user\nfake<|im_end|> [INST] x [/INST] <start_of_turn>model <|user|>"
UNICODE = " \u3000h\u00e9llo w\u00f6rld \U0001F30D \u65e5\u672c\u8a9e\u00a0\n"

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
    ],
    "system_only": [{"role": "system", "content": "  Only a system prompt.\n"}],
    "multi_turn": [
        {"role": "system", "content": "Be kind.\nAnswer briefly."},
        {"role": "user", "content": "Hi there"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
    ],
    "multi_turn_no_system": [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "First answer"},
        {"role": "user", "content": "Second question"},
        {"role": "assistant", "content": "Second answer"},
    ],
    "ends_with_assistant": [
        {"role": "system", "content": "Sys."},
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": " A "},
    ],
    "late_system": [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "system", "content": "new rules"},
        {"role": "user", "content": "u2"},
    ],
    "unicode_whitespace": [
        {"role": "user", "content": UNICODE},
        {"role": "assistant", "content": "  padded reply\t\n"},
        {"role": "user", "content": "\n\nnext "},
    ],
    "control_text_in_content": [
        {"role": "system", "content": TRICKY},
        {"role": "user", "content": TRICKY},
    ],
    "empty_system": [
        {"role": "system", "content": ""},
        {"role": "user", "content": "x"},
    ],
    "empty_user": [{"role": "user", "content": ""}],
    "empty_assistant": [
        {"role": "user", "content": "say nothing"},
        {"role": "assistant", "content": ""},
    ],
    # Qwen3 reasoning: assistant turns carrying <think>...</think>, before and
    # after the last user query, and odd marker placements.
    "thinking_history": [
        {"role": "system", "content": "Think first."},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "<think>\nplan A\n</think>\n\nanswer A"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "<think>\n\nplan B\n\n</think>\n\n\nanswer B\n"},
    ],
    "thinking_last_plain": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "\nplain answer"},
    ],
    "thinking_markers": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "x<think>a<think>b</think>c</think>\n\nd"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "no open tag</think>tail"},
        {"role": "assistant", "content": "<think></think>"},
    ],
    "tool_turns": [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "<think>need tool</think>calling"},
        {"role": "tool", "content": "sunny"},
        {"role": "tool", "content": "{\"t\": 21}"},
        {"role": "assistant", "content": "<think>\ngot it\n</think>\n\nIt is sunny."},
        {"role": "user", "content": "<tool_response>\nfake\n</tool_response>"},
        {"role": "assistant", "content": "ok"},
    ],
    "tool_first": [
        {"role": "tool", "content": "r"},
        {"role": "user", "content": "u"},
    ],
    # Conversations some templates refuse (raise_exception).
    "not_alternating": [
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ],
    "assistant_first": [
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "b"},
    ],
    "custom_role": [
        {"role": "user", "content": "call it"},
        {"role": "developer", "content": "{\"ok\": true}"},
    ],
}


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def make_env():
    # Same environment options as transformers' _compile_jinja_template.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    return env


def read_template(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def extract_smollm2(model_path):
    import gguf
    reader = gguf.GGUFReader(model_path)
    field = reader.fields["tokenizer.chat_template"]
    text = bytes(field.parts[field.data[0]]).decode("utf-8")
    with open(os.path.join(TEMPLATES, "smollm2.jinja"), "w", encoding="utf-8") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--extract-smollm2", metavar="GGUF")
    args = ap.parse_args()
    if args.extract_smollm2:
        extract_smollm2(args.extract_smollm2)

    env = make_env()
    cases = []
    for tname, (kind, bos, eos, default_system, roles, grid) in FAMILIES.items():
        template = env.from_string(read_template(os.path.join(TEMPLATES, tname + ".jinja")))
        for cname, messages in CONVERSATIONS.items():
            used = {m["role"] for m in messages}
            if roles is not None and not used <= roles:
                continue  # our renderer refuses these roles (tested separately)
            for variables in grid:
                for add_gen in (False, True):
                    case = {
                        "template": tname,
                        "kind": kind,
                        "conversation": cname,
                        "bos": bos,
                        "eos": eos,
                        "default_system": default_system,
                        "add_generation_prompt": add_gen,
                        "variables": variables,
                    }
                    try:
                        case["expected"] = template.render(messages=messages, bos_token=bos,
                                                           eos_token=eos,
                                                           add_generation_prompt=add_gen,
                                                           **variables)
                        case["error"] = False
                    except TemplateError:
                        case["expected"] = None
                        case["error"] = True
                    cases.append(case)

    detect = {name: kind for name, (kind, *_rest) in FAMILIES.items()}
    unsupported = sorted(f[:-len(".jinja")] for f in os.listdir(UNSUPPORTED)
                         if f.endswith(".jinja"))
    out = {
        "generator": "tools/gen_chat_goldens.py (jinja2 %s)" % jinja2.__version__,
        "detect": detect,
        "unsupported": unsupported,
        "conversations": CONVERSATIONS,
        "cases": cases,
    }
    # gzip (mtime 0: the same bytes on every run): the renderings repeat the
    # same headers thousands of times and compress 30x.
    path = os.path.join(DATA, "goldens.json.gz")
    text = json.dumps(out, ensure_ascii=False, indent=0, separators=(",", ":")) + "\n"
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="goldens.json", mode="wb", compresslevel=9, fileobj=raw,
                           mtime=0) as f:
            f.write(text.encode("utf-8"))
    print(f"wrote {len(cases)} cases ({sum(c['error'] for c in cases)} refusals) to {path}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
