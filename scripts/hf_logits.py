#!/usr/bin/env python3
"""Loads an exported model directory with transformers and writes its logits on a given batch.

  python scripts/hf_logits.py MODEL_DIR BATCH_JSON OUT_SAFETENSORS

BATCH_JSON: {"input_ids": [[...]], "attention_mask": [[...]], "texts": ["..."]}. Positions are
counted over real tokens only (as generate does with padding), so left-padded rows see the same
positions as unpadded ones. Writes {"logits": [B, T, V] float32} and prints one JSON line:
{"architecture", "dtype", "token_ids": [ids of each text by AutoTokenizer, or null]}.
"""
import json
import sys

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    model_dir, batch_path, out = sys.argv[1:4]
    batch = json.load(open(batch_path))
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    ids = torch.tensor(batch["input_ids"], dtype=torch.long)
    mask = torch.tensor(batch["attention_mask"], dtype=torch.long)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    save_file({"logits": logits.float().contiguous()}, out)
    token_ids = None
    if batch.get("texts"):
        tok = AutoTokenizer.from_pretrained(model_dir)
        token_ids = [tok.encode(t, add_special_tokens=False) for t in batch["texts"]]
    print(json.dumps({"architecture": type(model).__name__, "dtype": str(model.dtype), "token_ids": token_ids}))


if __name__ == "__main__":
    main()
