#!/usr/bin/env bash
# The Python venv in which `reagent bench trl` runs TRL's GRPOTrainer (scripts/trl_grpo.py)
# beside our in-process GRPO. Idempotent: a venv whose stamp matches the pins is left as it is.
# Not part of `scripts/setup.sh all`: only the bench needs it.
#
#   scripts/trl_venv.sh            make target/trl-venv (REAGENT_TRL_VENV overrides the place)
#   scripts/trl_venv.sh --check    exit 0 if the venv imports torch, transformers and trl, else 1
#
# As scripts/sb3_venv.sh does: TRL 1.16.0, transformers 5.23.0, accelerate, datasets and their
# dependencies from PyPI, pinned with --no-deps (the set pip resolves for trl==1.16.0, less torch,
# triton and the nvidia-*/cuda-* wheels), so that pip never fetches a second torch; torch itself
# from .libtorch through a .pth file, and scripts/cuda_stubs.py's stand-ins for the CUDA libraries
# that PyPI's torch build names, loaded first. CPU only. Needs python3 (3.10+), cc and readelf.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REAGENT_TRL_VENV:-$ROOT/target/trl-venv}"
LIBTORCH_ROOT="$ROOT/.libtorch"
PINS=(
  trl==1.16.0 transformers==5.23.0 accelerate==1.15.0 datasets==5.2.0
  tokenizers==0.23.3 safetensors==0.8.0 huggingface-hub==2.4.0 hf-xet==1.8.0
  numpy==2.4.6 pandas==3.1.1 pyarrow==26.0.1 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0
  psutil==7.2.2 packaging==26.3 pyyaml==6.0.3 regex==2026.11.15 tqdm==4.70.1 filelock==4.2.12
  fsspec==2026.9.0 typing-extensions==4.16.0 jinja2==3.1.6 markupsafe==3.0.4 sympy==1.14.0
  mpmath==1.3.0 networkx==3.6.1 httpx2==2.16.2 httpcore2==2.16.2 h11==0.16.0 anyio==4.16.0
  idna==3.20 typer==0.29.2 click==8.5.1 shellingham==1.5.4 rich==15.0.0 markdown-it-py==4.3.0
  mdurl==0.1.2 pygments==2.21.0 annotated-doc==0.0.7 truststore==0.10.5 pydantic==2.14.3
  pydantic-core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5 python-dateutil==4.0.0
  tzdata==2026.6
)
STAMP="$VENV/.reagent-trl-$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-16)"
say() { printf 'trl-venv: %s\n' "$*" >&2; }
check() { "$VENV/bin/python" -c 'import torch, transformers, trl; torch.zeros(1).sum()' >/dev/null 2>&1; }
# shellcheck source=scripts/torch_venv.sh
. "$ROOT/scripts/torch_venv.sh"
torch_venv_ready "$@"
say "making ${VENV#"$ROOT"/} (trl 1.16.0, transformers 5.23.0, torch from .libtorch)"
torch_venv_install
check || { say "the venv does not import torch, transformers and trl"; exit 1; }
touch "$STAMP"
say "ready: $("$VENV/bin/python" -c 'import torch, transformers as t, trl; print(f"torch {torch.__version__}, transformers {t.__version__}, trl {trl.__version__}")')"
