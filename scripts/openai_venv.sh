#!/usr/bin/env bash
# The official OpenAI Python client, pinned, in target/openai-venv: reagent/tests/suite/serve.rs drives
# `reagent serve` with it (scripts/openai_client.py), as users' own tools would. No torch.
# Idempotent: a venv whose stamp matches the pins is left as it is.
#
#   scripts/openai_venv.sh           make target/openai-venv (REAGENT_OPENAI_VENV overrides the place)
#   scripts/openai_venv.sh --check   exit 0 if the venv imports openai, else 1
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REAGENT_OPENAI_VENV:-$ROOT/target/openai-venv}"
# openai and its whole dependency closure, each pinned and installed with --no-deps.
PINS=(
  openai==3.57.0 annotated-types==0.8.0 anyio==4.16.0 h11==0.16.0 httpcore2==2.16.2 httpx2==2.16.2
  idna==3.20 jiter==0.19.0 pydantic==2.14.4 pydantic_core==2.50.5 sniffio==1.3.1 truststore==0.10.5
  typing-inspection==0.4.5 typing_extensions==4.16.0
)
STAMP="$VENV/.reagent-openai-$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-16)"
say() { printf 'openai-venv: %s\n' "$*" >&2; }
check() { "$VENV/bin/python" -c 'import openai' >/dev/null 2>&1; }

# shellcheck source=scripts/torch_venv.sh
. "$ROOT/scripts/torch_venv.sh"
torch_venv_ready "$@"
say "making ${VENV#"$ROOT"/} (openai 3.57.0)"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check --no-deps --no-compile "${PINS[@]}"
check || { say "the venv does not import openai"; exit 1; }
touch "$STAMP"
say "ready: openai $("$VENV/bin/python" -c 'import openai; print(openai.__version__)')"
