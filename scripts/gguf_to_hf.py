#!/usr/bin/env python3
"""Converts a GGUF model file into a Hugging Face model directory in float32, with transformers'
GGUF reader, then loads the directory back and checks it.

  python scripts/gguf_to_hf.py GGUF_FILE OUT_DIR [--expect KEY=JSON ...] [--ask TEXT --answer-contains WORD]

Run in target/hf-venv (scripts/hf_venv.sh: transformers 5.23.0 with gguf and accelerate);
scripts/smollm2.sh runs it on SmolLM2-135M-Instruct. OUT_DIR gets what save_pretrained writes:
config.json, model.safetensors (every weight dequantized to f32), generation_config.json,
tokenizer.json, tokenizer_config.json and chat_template.jinja. OUT_DIR must not exist yet (the
caller writes to a temporary directory and renames it).

Checks, each failing with exit 1 and a message: every weight is a plain f32 tensor (nothing left
in GGUF blocks); the saved directory, loaded without the GGUF file, gives the converted model's
logits exactly; `--expect` entries hold in config.json (KEY may be dotted into nested objects,
e.g. rope_parameters.rope_theta=100000); and the greedy answer to the chat prompt `--ask`, which
is printed, contains `--answer-contains`.

transformers loads a GGUF file through a quantizer (GgufHfQuantizer) even when it dequantizes every
tensor, as it does for llama, and save_pretrained refuses a model whose quantizer cannot serialize;
`remove_quantization_config` drops the quantizer and config.json's `quantization_config`, leaving
the plain f32 model, which saves as any other.
"""
import argparse
import json
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

START = time.monotonic()


def say(message):
    print(f"gguf-to-hf: [{time.monotonic() - START:5.1f} s] {message}", flush=True)


def fail(message):
    print(f"gguf-to-hf: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def check_expectations(config, expectations):
    for entry in expectations:
        key, _, raw = entry.partition("=")
        want = json.loads(raw)
        got = config
        for part in key.split("."):
            got = got.get(part) if isinstance(got, dict) else None
        if got != want:
            fail(f"config.json's {key} is {got!r}, expected {want!r}")
    say(f"config.json has {', '.join(expectations)}")


def greedy_answer(model, tokenizer, question):
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": question}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=40, do_sample=False)
    return tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True).strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf_file")
    parser.add_argument("out_dir")
    parser.add_argument("--expect", action="append", default=[], metavar="KEY=JSON")
    parser.add_argument("--ask", metavar="TEXT")
    parser.add_argument("--answer-contains", metavar="WORD")
    args = parser.parse_args()
    if os.path.exists(args.out_dir):
        fail(f"{args.out_dir} exists already")
    src_dir, name = os.path.split(os.path.abspath(args.gguf_file))

    say(f"reading the tokenizer of {name}")
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)
    say(f"reading and dequantizing the weights of {name} to float32")
    model = AutoModelForCausalLM.from_pretrained(src_dir, gguf_file=name, dtype=torch.float32).eval()
    bad = {f"{n}: {p.dtype}" for n, p in model.state_dict().items() if p.dtype != torch.float32}
    if bad:
        fail(f"weights left quantized or not in f32: {sorted(bad)[:5]}")
    if model.hf_quantizer is not None:
        model.hf_quantizer.remove_quantization_config(model)

    say(f"writing {type(model).__name__} ({sum(p.numel() for p in model.parameters()):,} parameters) to {args.out_dir}")
    model.save_pretrained(args.out_dir)
    tokenizer.save_pretrained(args.out_dir)

    say("loading the written directory back (without the GGUF file)")
    saved = AutoModelForCausalLM.from_pretrained(args.out_dir, dtype=torch.float32).eval()
    probe = torch.tensor([list(range(1, 33))])
    with torch.no_grad():
        delta = (saved(probe).logits - model(probe).logits).abs().max().item()
    if delta != 0.0:
        fail(f"the written model's logits differ from the converted one's by {delta}")
    with open(os.path.join(args.out_dir, "config.json")) as f:
        check_expectations(json.load(f), args.expect)

    if args.ask:
        saved_tokenizer = AutoTokenizer.from_pretrained(args.out_dir)
        answer = greedy_answer(saved, saved_tokenizer, args.ask)
        say(f"greedy answer to {args.ask!r}: {answer!r}")
        if args.answer_contains and args.answer_contains not in answer:
            fail(f"the greedy answer to {args.ask!r} does not contain {args.answer_contains!r}: {answer!r}")
    say(f"done: {', '.join(sorted(os.listdir(args.out_dir)))}")


if __name__ == "__main__":
    main()
