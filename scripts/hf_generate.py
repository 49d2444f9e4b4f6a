#!/usr/bin/env python3
"""transformers' generate as the baseline of `reagent bench generate`: new tokens per second of
sampling from a model directory, on the prompt the bench gives, at each batch size.

  python scripts/hf_generate.py --params JSON

JSON: {"model_dir", "prompt_ids": [...], "batches": [1, 8, 32], "new_tokens": 64,
"repeats": 3, "threads": 2, "dtype": "float32" | "bfloat16", "seed": 0}. Every row gets the same
prompt; sampling is at temperature 1 over the whole vocabulary (top_k=0, top_p=1) and every row
makes exactly `new_tokens` tokens (min_new_tokens = max_new_tokens), as the bench's side does.
One untimed warm-up generation per batch size, then `repeats` timed ones. Prints one JSON line:
{"torch", "transformers", "threads", "dtype", "runs": [{"batch", "seconds": [...], "tokens"}]}.
"""
import json
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM


def main():
    params = json.loads(sys.argv[sys.argv.index("--params") + 1])
    torch.set_num_threads(int(params["threads"]))
    dtype = getattr(torch, params.get("dtype", "float32"))
    model = AutoModelForCausalLM.from_pretrained(params["model_dir"], dtype=dtype).eval()
    prompt = params["prompt_ids"]
    n = int(params["new_tokens"])
    runs = []
    for batch in params["batches"]:
        ids = torch.tensor([prompt] * batch, dtype=torch.long)
        mask = torch.ones_like(ids)
        kwargs = dict(
            attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=True,
            temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0,
        )
        torch.manual_seed(int(params.get("seed", 0)))
        with torch.inference_mode():
            model.generate(ids, **kwargs)
            seconds = []
            for _ in range(int(params["repeats"])):
                start = time.perf_counter()
                out = model.generate(ids, **kwargs)
                seconds.append(time.perf_counter() - start)
                assert out.shape[1] == len(prompt) + n, out.shape
        runs.append({"batch": batch, "seconds": seconds, "tokens": batch * n})
        print(f"hf-generate: batch {batch}: {batch * n} tokens in {min(seconds):.2f}-{max(seconds):.2f} s",
              file=sys.stderr, flush=True)
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "threads": torch.get_num_threads(), "dtype": str(dtype).removeprefix("torch."), "runs": runs}))


if __name__ == "__main__":
    main()
