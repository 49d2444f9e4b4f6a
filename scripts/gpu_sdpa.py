#!/usr/bin/env python3
"""The attention kernel PyTorch picks for the call Reagent's model makes, and its memory.

policy/src/model/attention.rs calls scaled_dot_product_attention with grouped-query heads
(enable_gqa) and, for training's right-padded batches, is_causal without a mask; before issue 29
it passed an explicit boolean mask, which the flash kernel refuses. For a Qwen2-0.5B-shaped layer
(14 query heads, 2 key/value heads, head dim 64, bf16) at T = 1024 and 4096, this prints which
backend torch._fused_sdp_choice picks for each call, and the peak memory and time of one forward
and backward of each. Run by scripts/gpu_check.sh on the GPU machine (needs CUDA).
"""

import argparse
import json
import time

import torch
import torch.nn.functional as F


def measure(t, masked):
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    shape = dict(device="cuda", dtype=torch.bfloat16, requires_grad=True)
    q = torch.randn(1, 14, t, 64, **shape)
    k = torch.randn(1, 2, t, 64, **shape)
    v = torch.randn(1, 2, t, 64, **shape)
    mask = torch.ones(t, t, device="cuda", dtype=torch.bool).tril() if masked else None
    causal = not masked
    choice = torch._fused_sdp_choice(q, k, v, mask, 0.0, causal, enable_gqa=True)
    backend = torch.nn.attention.SDPBackend(choice).name
    base = torch.cuda.memory_allocated()
    times = []
    for _ in range(4):
        torch.cuda.synchronize()
        start = time.perf_counter()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=True)
        out.float().sum().backward()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        q.grad = k.grad = v.grad = None
    peak = torch.cuda.max_memory_allocated() - base
    return {"t": t, "call": "explicit mask" if masked else "is_causal, no mask", "backend": backend,
            "peak_mib": peak / 2**20, "fwd_bwd_ms": 1e3 * sorted(times[1:])[1]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_sdpa: torch sees no CUDA device")
    rows = [measure(t, masked) for t in (1024, 4096) for masked in (False, True)]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    print("| T | call | backend | peak MiB | fwd+bwd ms |")
    print("|---:|---|---|---:|---:|")
    for r in rows:
        print(f"| {r['t']} | {r['call']} | {r['backend']} | {r['peak_mib']:.0f} | {r['fwd_bwd_ms']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
