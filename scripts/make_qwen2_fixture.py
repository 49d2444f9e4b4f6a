"""Writes policy/fixtures/qwen2-tiny/: a small random Qwen2 made by Hugging Face transformers,
the logits transformers computes for a fixed padded batch, and a tiny ChatML byte-level BPE
tokenizer with its encodings of a few strings. The policy crate's tests check that its causal
LM and tokenizer wrapper reproduce these (policy/tests/suite/parity.rs).

Generated once and committed; rerun only to change the fixture. How it was run (2 CPU cores,
no GPU), with torch from the repository's libtorch (the CUDA wheel, whose Python module needs
the CUDA libraries at import even on a CPU-only machine):

    pip install --target /tmp/pyhf transformers==5.23.0 safetensors tokenizers numpy \
        typing_extensions sympy networkx jinja2 fsspec filelock mpmath markupsafe
    pip install --target /tmp/pynv "cuda-toolkit[cublas,cufft,cufile,curand,cusparse,nvjitlink]==13.0.2" \
        nvidia-cudnn-cu13==9.19.0.56 nvidia-cusparselt-cu13==0.8.0 nvidia-nccl-cu13==2.28.9 \
        nvidia-nvshmem-cu13==3.4.5
    LD_LIBRARY_PATH=$(ls -d /tmp/pynv/nvidia/*/lib | tr '\\n' ':').libtorch/nvidia/cu13/lib \
    PYTHONPATH=.libtorch:/tmp/pyhf python3 scripts/make_qwen2_fixture.py

Versions: Python 3.11.7, torch 2.11.0 (+cu130 wheel, run on the CPU), transformers 5.23.0,
tokenizers 0.23.3 (Python), safetensors 0.8.0, numpy 2.4.6.

Weights are redrawn after construction with larger spreads than transformers' N(0, 0.02²)
initialisation (which gives logits near 0 and zero biases), so that the 1e-4 comparison is
demanding and the q/k/v biases and norm weights are really exercised.
"""

import json
import os

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import Qwen2Config, Qwen2ForCausalLM

OUT = os.path.join(os.path.dirname(__file__), "..", "policy", "fixtures", "qwen2-tiny")

# Qwen2's pre-tokenizer split (from its tokenizer.json); it needs look-ahead, so the Rust
# side must run it with fancy-regex.
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

CORPUS = [
    "The agent calls <tool>calc(12 * 7)</tool> and then answers <answer>84</answer>.",
    "What is the capital of France? Paris is the capital of France.",
    "Search the knowledge base for the author of the book, then answer.",
    "Héllo wörld — ünïcode text, 数字 and emoji 🙂 appear too.",
    "def f(x):\n    return x + 1\n",
] * 20

TOKENIZER_CASES = [
    "Hello world",
    "<tool>calc(2 + 3)</tool>",
    "Héllo wörld 🙂 数字",
    "line one\n\nline two  spaced",
    "<|im_start|>user\nhi<|im_end|>\n",
]


def make_model():
    torch.manual_seed(20260121)
    config = Qwen2Config(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attn_implementation="eager",
    )
    return perturb(Qwen2ForCausalLM(config).eval())


def perturb(model):
    """Redraws the weights with larger spreads (see the header); also used by
    make_family_fixtures.py."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
    return model.eval()


def golden_batch(model):
    # Row 0: 10 real tokens. Row 1: 7 real tokens, left-padded by 3 (pad id 0, mask 0), with
    # positions counting real tokens only (transformers' generate() does the same).
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, 300, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.int64)
    ids[1, :3] = 0
    mask[1, :3] = 0
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits.float()
        lone = model(input_ids=ids[1:, 3:]).logits.float()
    assert torch.allclose(logits[1, 3:], lone[0], atol=1e-5), "left padding changed real logits"
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "logits": logits.contiguous()}


def make_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=296,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    assert tok.get_vocab_size() <= 300
    cases = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in TOKENIZER_CASES]
    return tok, cases


def main():
    os.makedirs(OUT, exist_ok=True)
    model = make_model()
    model.save_pretrained(OUT, safe_serialization=True)
    save_file(golden_batch(model), os.path.join(OUT, "golden.safetensors"))
    tok, cases = make_tokenizer()
    tok.save(os.path.join(OUT, "tokenizer.json"))
    with open(os.path.join(OUT, "tokenizer_cases.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases) + "\n]\n")
    for name in sorted(os.listdir(OUT)):
        print(name, os.path.getsize(os.path.join(OUT, name)))


if __name__ == "__main__":
    main()
