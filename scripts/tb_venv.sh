#!/usr/bin/env bash
# The Python venv in which the tests read the learner's TensorBoard event files back with
# TensorBoard's own reader (scripts/tb_read.py: EventAccumulator and the CRC-checking record
# reader). Idempotent: a venv whose stamp matches the pins is left as it is.
#
#   scripts/tb_venv.sh            make target/tb-venv (REAGENT_TB_VENV overrides the place)
#   scripts/tb_venv.sh --check    exit 0 if the venv imports TensorBoard's event reader, else 1
#
# What goes in (from PyPI, pinned, --no-deps): tensorboard 2.21.0 and the four packages its
# event reader imports (about 115 MB, mostly numpy). Not the web server's dependencies: to
# browse runs, `pip install tensorboard` anywhere and `tensorboard --logdir runs/`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REAGENT_TB_VENV:-$ROOT/target/tb-venv}"
PINS=(
  tensorboard==2.21.0
  protobuf==7.36.2
  numpy==2.4.6
  absl-py==2.5.1
  packaging==26.3
)
STAMP="$VENV/.reagent-tb-$(printf '%s\n' "${PINS[@]}" | sha256sum | cut -c1-16)"

say() { printf 'tb-venv: %s\n' "$*" >&2; }

check() {
  "$VENV/bin/python" -c 'from tensorboard.backend.event_processing import event_accumulator' >/dev/null 2>&1
}

if [ "${1:-}" = --check ]; then
  [ -x "$VENV/bin/python" ] && check
  exit
fi

# Tests may ask for the venv from several processes at once: one makes it, the others wait.
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9

if [ -f "$STAMP" ] && check; then
  say "present in ${VENV#"$ROOT"/}"
  exit 0
fi
command -v python3 >/dev/null || { say "python3 is missing (apt-get install python3-venv)"; exit 1; }

say "making ${VENV#"$ROOT"/} (tensorboard 2.21.0, its event reader only)"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check --no-deps --no-compile "${PINS[@]}"
check || { say "the venv does not import tensorboard's event_accumulator"; exit 1; }
touch "$STAMP"
say "ready: tensorboard $("$VENV/bin/python" -c 'import tensorboard; print(tensorboard.__version__)')"
