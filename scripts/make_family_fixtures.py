"""Writes policy/fixtures/{qwen3,llama3}-tiny{,-tied}/: small random Qwen3 and Llama 3 models made
by Hugging Face transformers, with untied and tied embeddings, and the logits transformers
computes for the same fixed padded batch as the Qwen2 fixture (scripts/make_qwen2_fixture.py,
whose golden_batch and perturb this reuses). The policy crate's tests check that its causal LM reproduces
them within 1e-4 (policy/tests/suite/families.rs).

What each family exercises:
  qwen3   per-head q_norm/k_norm RMSNorm, no q/k/v bias, head_dim 16 given in config.json
          (not hidden_size / num_attention_heads = 8);
  llama3  rope_parameters of type llama3 with original_max_position_embeddings 64, so that with
          head_dim 8 and theta 10000 the four frequencies fall in all three bands (kept,
          interpolated, divided by factor).

Generated once and committed; rerun only to change the fixtures:

    scripts/hf_venv.sh && target/hf-venv/bin/python scripts/make_family_fixtures.py

Versions: Python 3.11.7, torch 2.11.0 (+cu130 wheel from .libtorch, run on the CPU),
transformers 5.23.0, safetensors 0.8.0, tokenizers 0.23.3.

Weights are redrawn after construction with larger spreads (norm weights 1 ± 0.2, matrices
N(0, 1/fan_in)), as the Qwen2 fixture does, so that the comparison is demanding.
"""

import os
import sys

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, os.path.dirname(__file__))
from make_qwen2_fixture import golden_batch, perturb  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "policy", "fixtures")

COMMON = dict(
    vocab_size=300,  # golden_batch draws ids below 300
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
    rms_norm_eps=1e-6,
    attn_implementation="eager",
)


def qwen3(tied):
    return Qwen3ForCausalLM(
        Qwen3Config(
            **COMMON,
            head_dim=16,
            rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
            tie_word_embeddings=tied,
        )
    )


def llama3(tied):
    return LlamaForCausalLM(
        LlamaConfig(
            **COMMON,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
            tie_word_embeddings=tied,
        )
    )


def main():
    for seed, (name, make) in enumerate([("qwen3-tiny", qwen3), ("llama3-tiny", llama3)]):
        for tied in (False, True):
            torch.manual_seed(20260301 + 2 * seed + tied)
            model = perturb(make(tied))
            assert (model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()) == tied
            out = os.path.join(FIXTURES, name + ("-tied" if tied else ""))
            os.makedirs(out, exist_ok=True)
            model.save_pretrained(out, safe_serialization=True)
            save_file(golden_batch(model), os.path.join(out, "golden.safetensors"))
            sizes = {f: os.path.getsize(os.path.join(out, f)) for f in sorted(os.listdir(out))}
            print(out, sizes)


if __name__ == "__main__":
    main()
