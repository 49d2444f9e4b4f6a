#!/usr/bin/env bash
# The Python venv in which `reagent bench cartpole --against-sb3` runs Stable-Baselines3
# (scripts/sb3_cartpole.py) beside our PPO. Idempotent: a venv whose stamp matches the pins is
# left as it is.
#
#   scripts/sb3_venv.sh            make target/sb3-venv (REAGENT_SB3_VENV overrides the place)
#   scripts/sb3_venv.sh --check    exit 0 if the venv imports torch, SB3 and gymnasium, else 1
#
# What goes in (from PyPI, pinned, --no-deps so that pip never fetches a second torch):
#   stable-baselines3 2.9.2, gymnasium 1.4.0 and their small dependencies;
#   torch itself is NOT installed: a .pth file puts .libtorch (scripts/setup.sh, torch 2.11.0)
#   on the venv's path, so Python and Rust run the very same libtorch.
# That torch wheel is PyPI's CUDA build: its libraries need cuDNN, cuBLAS, NCCL and seven more
# that are not on a CPU machine (`import torch` fails with "libcudnn.so.9: cannot open shared
# object file"). The nvidia-* wheels from PyPI would supply them at about 3 GB; instead
# scripts/cuda_stubs.py compiles stand-ins (well under 1 MB) that a second .pth file loads before
# torch. Only the CPU is used. Needs python3 (3.10+), a C compiler and readelf.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REAGENT_SB3_VENV:-$ROOT/target/sb3-venv}"
LIBTORCH_ROOT="$ROOT/.libtorch"
PINS=(
  stable-baselines3==2.9.2
  gymnasium==1.4.0
  cloudpickle==3.1.2
  farama-notifications==0.0.6
  numpy==2.4.6
  typing-extensions==4.16.0
  filelock==4.2.12
  sympy==1.14.0
  mpmath==1.3.0
  networkx==3.6.1
  jinja2==3.1.6
  markupsafe==3.0.4
  fsspec==2026.9.0
)
STAMP="$VENV/.reagent-sb3-$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-16)"

say() { printf 'sb3-venv: %s\n' "$*" >&2; }

check() {
  "$VENV/bin/python" -c 'import torch, stable_baselines3, gymnasium; torch.zeros(1).sum()' >/dev/null 2>&1
}
# shellcheck source=scripts/torch_venv.sh
. "$ROOT/scripts/torch_venv.sh"
torch_venv_ready "$@"
say "making ${VENV#"$ROOT"/} (stable-baselines3 2.9.2, gymnasium 1.4.0, torch from .libtorch)"
torch_venv_install

check || { say "the venv does not import torch, stable_baselines3 and gymnasium"; exit 1; }
touch "$STAMP"
say "ready: $("$VENV/bin/python" -c 'import torch, stable_baselines3 as s, gymnasium as g; print(f"torch {torch.__version__}, stable-baselines3 {s.__version__}, gymnasium {g.__version__}")')"
