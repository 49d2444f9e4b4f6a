#!/usr/bin/env bash
# Writes learner/fixtures/micro-math-sft/: the built-in `micro` model after a supervised cold
# start on difficulty-1 `math` reference episodes, fixed in steps (3000 updates of 8 episodes,
# seed 1), so it is the same on every machine up to floating-point summation order. The
# learning tests start RL from it instead of spending minutes of the suite on SFT; the SFT
# itself is tested on its own (learner/tests/suite/sft.rs) and measured in docs/experiments/cold-start.md.
#
# Generated once and committed; rerun only to change the fixture:
#   scripts/make_micro_sft_fixture.sh      (about a minute and a half on 2 CPU cores, release build)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export LIBTORCH="${LIBTORCH:-$ROOT/.libtorch/torch}"
cargo build --release -p reagent
OUT="$(mktemp -d)"
OMP_NUM_THREADS=1 "$ROOT/target/release/reagent" sft --size micro --steps 3000 --minutes 30 --seed 1 --eval-tasks 64 --out "$OUT"
mkdir -p "$ROOT/learner/fixtures/micro-math-sft"
cp "$OUT/model/config.json" "$OUT/model/model.safetensors" "$OUT/sft_report.json" "$ROOT/learner/fixtures/micro-math-sft/"
rm -rf "$OUT"
echo "wrote learner/fixtures/micro-math-sft"
