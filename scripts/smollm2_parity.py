#!/usr/bin/env python3
"""transformers' outputs on SmolLM2-135M-Instruct's real weights, for policy/tests/suite/smollm2.rs
to compare our model, generation and tokenizer wrapper against.

  target/hf-venv/bin/python scripts/smollm2_parity.py MODEL_DIR OUT_DIR

MODEL_DIR: the directory scripts/smollm2.sh makes (target/smollm2). The venv: scripts/hf_venv.sh
(transformers 5.23.0, torch 2.11.0 from .libtorch). OUT_DIR (created) receives:

  logits.safetensors  for each prompt NAME of PROMPTS: `NAME.ids` (int64 [T]) and `NAME.logits`
                      (float32 [T, 49152], every position, eager attention in f32); about 1,000
                      positions in all, ~200 MB.
  cases.json          {"prompts": [{name, text, length}],
                       "greedy": [{name, prompt_ids, tokens, logprobs, margins}]: 64 greedy new
                         tokens (max_new_tokens = min_new_tokens = 64, do_sample=False, and no EOS
                         id, so nothing stops a row or masks a logit), each token's log-softmax of
                         the raw logits and the gap between the two largest logits at that step;
                       "tokenizer": [{text, ids, decoded, decoded_skip_special}]: AutoTokenizer's
                         ids with add_special_tokens=False, and decode(ids) with and without
                         skip_special_tokens}

The prompts: `chat` (SmolLM2's chat template applied to a system and a user message, with the
generation prompt), `code`, `long` (English prose built deterministically and cut to exactly 512
tokens), `short` and `digits_unicode`. It runs in about 30 s on two cores (torch threads: 2).
"""
import json
import os
import sys
import time

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

START = time.monotonic()
NEW_TOKENS = 64
LONG_TOKENS = 512
GREEDY = ["chat", "short", "code"]

CODE = '''fn main() {
    let xs: Vec<u64> = (1..=10).map(|x| x * x).collect();
    let total: u64 = xs.iter().sum();
    println!("sum of squares = {total}");
}

def fibonacci(n: int) -> list[int]:
    """The first n Fibonacci numbers."""
    out = [0, 1]
    while len(out) < n:
        out.append(out[-1] + out[-2])
    return out[:n]
'''
SHORT = "The capital of France is"
DIGITS_UNICODE = "Ünïcödé 数学 3.14159 ✓ 12345 + 678.90 = 13024.9; naïve café — 你好，世界！🙂 Привет, мир π≈22/7"
TOPICS = ["the river", "a small library", "the old observatory", "winter in the mountains", "the harbour",
          "a field of wheat", "the last train home", "an orchard in spring"]


def long_text(tokenizer):
    """Deterministic prose, at least LONG_TOKENS tokens long."""
    sentences = []
    i = 0
    while len(tokenizer.encode(" ".join(sentences), add_special_tokens=False)) < LONG_TOKENS + 8:
        topic, other = TOPICS[i % len(TOPICS)], TOPICS[(3 * i + 1) % len(TOPICS)]
        sentences.append(f"In chapter {i + 1}, the story returns to {topic}, where {2 * i + 3} people "
                         f"remember {other} and argue about what happened there in {1900 + 7 * i}.")
        i += 1
    return " ".join(sentences)


def say(message):
    print(f"smollm2-parity: [{time.monotonic() - START:5.1f} s] {message}", file=sys.stderr, flush=True)


def corpus(chat_text):
    return [
        CODE,
        "fn main() {\n    let x: Vec<u32> = (0..10).collect();\n    println!(\"{:?}\", x);\n}\n",
        "import numpy as np\n\nclass A:\n\tdef __init__(self):\n\t\tself.x = {'k': [1, 2, 3]}\n",
        "naïve café — 你好，世界！🙂 Привет, мир",
        "Ünïcödé 数学 ✓ ∀x∈ℝ: x²≥0 — ½ ¾ € £ ¥ 🎉🚀 é̃ 한국어 العربية",
        "12345 + 678.90 = 13024.9; 3.14159e-10",
        "0 00 000 0000 1 22 333 4444 55555 666666 7777777 -42 +3.5 1,000,000 2024-06-01",
        "a  b   c    d\n\n\n\te\t\tf  \n  g",
        "    leading and trailing spaces    ",
        "\n\n\n",
        " ",
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "before<|endoftext|>after",
        "<|im_start|><|im_end|><|endoftext|>",
        "text with <|im_end|> inside and <|im_start|>system at the end",
        chat_text,
    ]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: smollm2_parity.py MODEL_DIR OUT_DIR")
    model_dir, out_dir = sys.argv[1:3]
    torch.set_num_threads(2)
    os.makedirs(out_dir, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    say(f"loaded {type(model).__name__} from {model_dir}")

    chat = tok.apply_chat_template(
        [{"role": "system", "content": "You are a concise assistant."},
         {"role": "user", "content": "Name three primary colours and say why they are called primary."}],
        tokenize=False, add_generation_prompt=True)
    texts = {"chat": chat, "code": CODE, "long": long_text(tok), "short": SHORT, "digits_unicode": DIGITS_UNICODE}
    prompts, tensors, ids_of = [], {}, {}
    with torch.no_grad():
        for name, text in texts.items():
            ids = tok.encode(text, add_special_tokens=False)
            if name == "long":
                ids = ids[:LONG_TOKENS]
            ids_of[name] = ids
            t = torch.tensor([ids])
            tensors[f"{name}.ids"] = t[0].clone()
            tensors[f"{name}.logits"] = model(input_ids=t).logits[0].float().contiguous()
            prompts.append({"name": name, "text": text, "length": len(ids)})
    say("logits of " + ", ".join(f"{p['name']} ({p['length']})" for p in prompts))
    save_file(tensors, os.path.join(out_dir, "logits.safetensors"))
    del tensors

    # No EOS: generation_config.json names <|im_end|>, and with it min_new_tokens would mask that
    # logit (and a stop would end rows early). Without it each token is the argmax of the raw
    # logits, as ours is at temperature 0 with no stop tokens (checked below).
    model.generation_config.eos_token_id = None
    greedy = []
    with torch.no_grad():
        for name in GREEDY:
            ids = torch.tensor([ids_of[name]])
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                                 min_new_tokens=NEW_TOKENS, do_sample=False, return_dict_in_generate=True,
                                 output_logits=True)
            tokens = out.sequences[0, ids.shape[1]:].tolist()
            logits = torch.stack(out.logits, 0)[:, 0].float()
            if len(tokens) != NEW_TOKENS or tokens != logits.argmax(-1).tolist():
                sys.exit(f"smollm2_parity: {name}: generate's tokens are not the argmax of its raw logits")
            top2 = logits.topk(2, dim=-1).values
            lps = logits.log_softmax(-1).gather(-1, torch.tensor(tokens)[:, None])[:, 0]
            greedy.append({"name": name, "prompt_ids": ids_of[name], "tokens": tokens, "logprobs": lps.tolist(),
                           "margins": (top2[:, 0] - top2[:, 1]).tolist()})
    say(f"{NEW_TOKENS} greedy tokens for " + ", ".join(GREEDY))

    tokenizer = []
    for text in corpus(chat):
        ids = tok.encode(text, add_special_tokens=False)
        tokenizer.append({"text": text, "ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                          "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    with open(os.path.join(out_dir, "cases.json"), "w", encoding="utf-8") as f:
        json.dump({"prompts": prompts, "greedy": greedy, "tokenizer": tokenizer}, f, ensure_ascii=False)
    say(f"tokenizer ids of {len(tokenizer)} texts; written to {out_dir}")


if __name__ == "__main__":
    main()
