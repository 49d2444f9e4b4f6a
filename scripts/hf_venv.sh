#!/usr/bin/env bash
# The Python venv in which scripts/make_family_fixtures.py (and make_qwen2_fixture.py) run
# Hugging Face transformers to make the policy crate's parity fixtures, scripts/smollm2.sh
# converts SmolLM2's GGUF, and scripts/chat_template_golden.py renders the chat-template
# fixtures. Idempotent: a venv whose stamp matches the pins is left as it is. Tests that compare
# with transformers live (cluster's export tests, policy's smollm2 tests) run their scripts in it;
# the others read committed files and never need it.
#
#   scripts/hf_venv.sh     make target/hf-venv (REAGENT_HF_VENV overrides the place)
#
# As scripts/sb3_venv.sh does: packages from PyPI pinned with --no-deps (pip never fetches a
# second torch), torch itself from .libtorch through a .pth file, and scripts/cuda_stubs.py's
# stand-ins for the CUDA libraries that PyPI's torch build names, loaded first. CPU only.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REAGENT_HF_VENV:-$ROOT/target/hf-venv}"
LIBTORCH_ROOT="$ROOT/.libtorch"
PINS=(
  transformers==5.23.0 tokenizers==0.23.3 safetensors==0.8.0 huggingface-hub==2.4.0
  numpy==2.4.6 packaging==26.3 pyyaml==6.0.3 regex==2026.11.15 tqdm==4.70.1 filelock==4.2.12
  fsspec==2026.9.0 typing-extensions==4.16.0 jinja2==3.1.6 markupsafe==3.0.4 sympy==1.14.0
  mpmath==1.3.0 networkx==3.6.1 hf-xet==1.8.0 httpx2==2.16.2 httpcore2==2.16.2 h11==0.16.0
  anyio==4.16.0 idna==3.20 typer==0.29.2 click==8.5.1 shellingham==1.5.4 rich==15.0.0
  markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0 annotated-doc==0.0.7 truststore==0.10.5
  # transformers' GGUF reader, for scripts/smollm2.sh (scripts/gguf_to_hf.py): gguf itself (its
  # `requests` is imported only to fetch remote files, which the conversion never does, so it is
  # left out) and accelerate, which from_pretrained requires for a GGUF file
  gguf==0.19.0 accelerate==1.15.0 psutil==7.2.2
)
STAMP="$VENV/.reagent-hf-$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-16)"
say() { printf 'hf-venv: %s\n' "$*" >&2; }
check() { "$VENV/bin/python" -c 'import torch, transformers, gguf, accelerate; torch.zeros(1).sum()' >/dev/null 2>&1; }
# shellcheck source=scripts/torch_venv.sh
. "$ROOT/scripts/torch_venv.sh"
torch_venv_ready "$@"
say "making ${VENV#"$ROOT"/} (transformers 5.23.0, torch from .libtorch)"
torch_venv_install
check || { say "the venv does not import torch, transformers, gguf and accelerate"; exit 1; }
touch "$STAMP"
say "ready: $("$VENV/bin/python" -c 'import torch, transformers as t; print(f"torch {torch.__version__}, transformers {t.__version__}")')"
