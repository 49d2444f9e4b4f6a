#!/usr/bin/env python3
"""The reference beside `reagent bench gpu`: the same shapes in PyTorch + transformers.

`reagent bench gpu` times one GRPO update of a Qwen2.5-0.5B-shaped model (fresh weights) at
64 x 1024 tokens in micro-batches of 16 rows, and KV-cache sampling of 64 prompt + 128 new tokens
at batch 1, 32 and 128. This script times the same work with transformers' Qwen2ForCausalLM
(sdpa attention, bf16) on the same device, in the same run, so that the check reports ratios:

- update, two recipes: `fp32-autocast` (fp32 weights and AdamW, bf16 autocast: the usual mixed
  precision of TRL / the HF Trainer with bf16=True) and `bf16` (bf16 weights, torch's AdamW on
  them: no fp32 masters, so it does less than Reagent's learner). The loss is a policy-gradient
  loss on the sampled tokens' log-probs (log_softmax in fp32 over the full logits, as TRL does);
  one optimizer step per update; median of 2 after a warm-up, as the Rust side.
- generation: model.generate(do_sample=True, temperature=1, top_k=0, exactly 128 new tokens),
  median of 2 after a warm-up.

Run by scripts/gpu_check.sh on the GPU machine. `--quick` runs toy sizes on the CPU (a smoke
test of the script itself; its rates mean nothing).
"""

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from transformers import Qwen2Config, Qwen2ForCausalLM


def qwen2_05b(quick):
    if quick:
        return Qwen2Config(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
                           attn_implementation="sdpa")
    # Qwen2.5-0.5B's config.json: the shape `reagent bench gpu` builds (qwen2-0.5b-shape).
    return Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                       rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                       attn_implementation="sdpa")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def update_rate(config, device, rows, tokens, micro, recipe):
    torch.manual_seed(0)
    dtype = torch.float32 if recipe == "fp32-autocast" else torch.bfloat16
    model = Qwen2ForCausalLM(config).to(device=device, dtype=dtype)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=device.type == "cuda")
    ids = torch.randint(0, config.vocab_size, (rows, tokens), device=device)
    adv = torch.randn(rows, device=device)
    watched = next(model.parameters())
    before = watched.detach().clone()
    rates = []
    for i in range(3):
        sync(device)
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for lo in range(0, rows, micro):
            x = ids[lo:lo + micro]
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=recipe == "fp32-autocast"):
                logits = model(input_ids=x).logits[:, :-1]
            logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, x[:, 1:, None]).squeeze(-1)
            loss = -(adv[lo:lo + micro, None] * logp).mean() * (x.shape[0] / rows)
            loss.backward()
            del logits, logp, loss
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync(device)
        if i > 0:
            rates.append(rows * tokens / (time.perf_counter() - start))
    changed = not torch.equal(watched.detach(), before)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None
    del model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return statistics.median(rates), changed, peak


def generation_rate(config, device, batch, prompt, new):
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, config.vocab_size, (batch, prompt), device=device)
    rates = []
    for i in range(3):
        sync(device)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                                 temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=new,
                                 min_new_tokens=new, pad_token_id=0, eos_token_id=None)
        sync(device)
        made = (out.shape[1] - prompt) * batch
        if made != batch * new:
            sys.exit(f"gpu_reference: generation at batch {batch} made {made} tokens, not {batch * new}")
        if i > 0:
            rates.append(made / (time.perf_counter() - start))
    del model
    return statistics.median(rates)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--quick", action="store_true", help="toy sizes on the CPU (tests the script)")
    args = ap.parse_args()
    device = torch.device("cpu" if args.quick else "cuda")
    config = qwen2_05b(args.quick)
    rows, tokens, micro = (8, 64, 4) if args.quick else (64, 1024, 16)
    batches, prompt, new = ([1, 4], 8, 8) if args.quick else ([1, 32, 128], 64, 128)
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    import transformers
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {name}")
    figures = {"device": name, "torch": torch.__version__, "transformers": transformers.__version__}
    print("| work | recipe | tokens/s | note |\n|---|---|---:|---|")
    for recipe in ["fp32-autocast", "bf16"]:
        rate, changed, peak = update_rate(config, device, rows, tokens, micro, recipe)
        figures[f"update_tokens_per_s_{recipe}"] = rate
        note = ("weights changed" if changed else "THE WEIGHTS DID NOT CHANGE") + (
            f"; peak {peak:.1f} GiB" if peak is not None else "")
        print(f"| update {rows} x {tokens}, micro-batches of {micro} | {recipe} | {rate:.0f} | {note} |")
        if not changed:
            sys.exit(1)
    for batch in batches:
        rate = generation_rate(config, device, batch, prompt, new)
        figures[f"generate_tokens_per_s_batch_{batch}"] = rate
        print(f"| generate {prompt} + {new}, batch {batch} | bf16 | {rate:.0f} | model.generate, sampling |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
