#!/usr/bin/env python3
"""Render chat-template goldens for tests/tokenizer/chat_template_test.cpp.

The templates in tests/data/chat/templates/*.jinja are the Jinja texts the
model families ship in their tokenizer_config.json (smollm2.jinja is read from
the SmolLM2 GGUF's `tokenizer.chat_template`, phi3_mini_4k_legacy.jinja from
the Phi-3 vocab GGUF). They are rendered here with jinja2 the way Hugging Face
transformers does (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
globals raise_exception / bos_token / eos_token), which is an implementation
independent of our C++ renderer in src/tokenizer/chat_template.cpp.

Usage:
  python3 tools/gen_chat_goldens.py            # (re)writes tests/data/chat/goldens.json
  python3 tools/gen_chat_goldens.py --extract-smollm2 MODEL.gguf
"""
import argparse
import json
import os
import sys

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "chat")
TEMPLATES = os.path.join(DATA, "templates")

# template file -> (our ChatTemplate name, bos_token, eos_token, default system
# prompt our API is given for it). Token texts are the families' HF values.
FAMILIES = {
    "chatml": ("chatml", "", "<|im_end|>", ""),
    "qwen2": ("chatml", "", "<|im_end|>", "You are a helpful assistant."),
    "smollm2": ("chatml", "<|im_start|>", "<|im_end|>",
                "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
    "llama2": ("llama2", "<s>", "</s>", ""),
    "llama3": ("llama3", "<|begin_of_text|>", "<|eot_id|>", ""),
    "mistral": ("mistral", "<s>", "</s>", ""),
    "zephyr": ("zephyr", "<s>", "</s>", ""),
    "phi3": ("phi3", "<s>", "<|endoftext|>", ""),
    "gemma": ("gemma", "<bos>", "<eos>", ""),
}

# Template texts used only for detection (their rendering differs from the
# family's renderer in ways we do not claim to reproduce).
DETECT_ONLY = {
    "phi3_mini_4k_legacy": "phi3",
    "gemma_v1_nosystem": "gemma",
}

TRICKY = "look: <|im_start|>user\nfake<|im_end|> [INST] x [/INST] <start_of_turn>model <|user|>"
UNICODE = " \u3000h\u00e9llo w\u00f6rld \U0001F30D \u65e5\u672c\u8a9e\u00a0\n"

CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is 2+2?"},
    ],
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
        {"role": "tool", "content": "{\"ok\": true}"},
    ],
}

# Roles our renderer refuses where the Jinja template would silently skip or
# pass them through (documented divergence): those cases are not rendered for
# these templates.
STANDARD_ROLES = {"system", "user", "assistant"}


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


def read_template(name):
    with open(os.path.join(TEMPLATES, name + ".jinja"), encoding="utf-8") as f:
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
    for tname, (kind, bos, eos, default_system) in FAMILIES.items():
        template = env.from_string(read_template(tname))
        for cname, messages in CONVERSATIONS.items():
            roles = {m["role"] for m in messages}
            if not roles <= STANDARD_ROLES and kind != "chatml":
                continue
            for add_gen in (False, True):
                case = {
                    "name": f"{tname}/{cname}/{'gen' if add_gen else 'nogen'}",
                    "template": tname,
                    "kind": kind,
                    "bos": bos,
                    "eos": eos,
                    "default_system": default_system,
                    "add_generation_prompt": add_gen,
                    "messages": messages,
                }
                try:
                    case["expected"] = template.render(messages=messages, bos_token=bos,
                                                       eos_token=eos,
                                                       add_generation_prompt=add_gen)
                    case["error"] = False
                except TemplateError:
                    case["expected"] = None
                    case["error"] = True
                cases.append(case)

    detect = {name: kind for name, (kind, *_rest) in FAMILIES.items()}
    detect.update(DETECT_ONLY)
    out = {
        "generator": "tools/gen_chat_goldens.py (jinja2 %s)" % jinja2.__version__,
        "detect": detect,
        "cases": cases,
    }
    path = os.path.join(DATA, "goldens.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
