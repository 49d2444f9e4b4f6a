#!/usr/bin/env bash
# The GPU device check (issue 29): `reagent bench gpu` on a GPU machine, plus the attention
# kernel PyTorch picks for the call the model makes and its memory at T = 1024 and 4096, and
# the reference beside it (scripts/gpu_reference.py: the same update and generation in
# transformers, so the figures are ratios).
#
#   scripts/gpu_check.sh build        # here: the release binary, stripped, into gpu-check/ (~26 MB)
#   scripts/gpu_check.sh run [OUT]    # on the GPU machine, from the repository root: the check;
#                                     # the report and the log go to OUT (default $OUT, else gpu-check/out)
#
# The GPU machine needs no Rust toolchain and no network: it needs gpu-check/ (carried there, it
# is git-ignored) and a Python with torch 2.11 built for CUDA, whose lib/ the binary loads
# libtorch from (PYTHON names that Python; default python3). The binary is the ordinary one:
# libtorch_cuda is loaded at run time (policy::device::cuda_library), so nothing is built for
# CUDA. One command, at most 12 minutes (its `timeout`s; 3.5 on an H200), prints one
# PASS/FAIL/SKIP line per part.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/gpu-check"
say() { printf 'gpu_check: %s\n' "$*" >&2; }

build() {
  cd "$ROOT"
  export LIBTORCH="${LIBTORCH:-$ROOT/.libtorch/torch}" LIBTORCH_BYPASS_VERSION_CHECK=0
  cargo build --release --locked -p reagent
  mkdir -p "$DIR"
  strip -o "$DIR/reagent" target/release/reagent
  cp "$ROOT/scripts/gpu_sdpa.py" "$ROOT/scripts/gpu_reference.py" "$DIR/"
  { git -C "$ROOT" rev-parse HEAD | tr -d '\n'; [ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] || printf ' (with uncommitted changes)'; echo; } >"$DIR/commit.txt"
  say "gpu-check/: $(du -sh "$DIR" | cut -f1) (binary of $(cat "$DIR/commit.txt"))"
  # The same binary on this machine: loads, and says why CUDA is or is not there.
  "$DIR/reagent" bench gpu --device cpu --quick >/dev/null 2>&1 \
    || { say "the stripped binary failed its CPU try (run: gpu-check/reagent bench gpu --device cpu --quick)"; exit 1; }
}

run() {
  local out="${1:-${OUT:-$DIR/out}}" py="${PYTHON:-python3}" lib
  mkdir -p "$out"
  [ -x "$DIR/reagent" ] || { say "no gpu-check/reagent: run scripts/gpu_check.sh build first (and carry gpu-check/)"; exit 2; }
  lib="$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')" \
    || { say "$py cannot import torch: set PYTHON to the Python that has torch 2.11"; exit 2; }
  say "libtorch from $lib; binary of $(cat "$DIR/commit.txt" 2>/dev/null || echo '?')"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt" >&2 || true
  local rc=0
  LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" timeout 420 \
    "$DIR/reagent" bench gpu --device cuda --report "$out/gpu-report.json" 2>&1 | tee "$out/bench-gpu.log" || rc=$?
  timeout 60 "$py" "$DIR/gpu_sdpa.py" --json "$out/sdpa.json" 2>&1 | tee "$out/sdpa.log" || rc=$((rc == 0 ? 1 : rc))
  # The reference in the same run: the learner's update and generation in transformers.
  timeout 240 "$py" "$DIR/gpu_reference.py" --json "$out/reference.json" 2>&1 | tee "$out/reference.log" \
    || rc=$((rc == 0 ? 1 : rc))
  say "report: $out/gpu-report.json, $out/sdpa.json, $out/reference.json; exit $rc"
  return "$rc"
}

case "${1:-}" in
  build) build ;;
  run) shift; run "$@" ;;
  *) say "usage: scripts/gpu_check.sh build | run [OUT]"; exit 2 ;;
esac
