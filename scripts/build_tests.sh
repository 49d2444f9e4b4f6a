#!/usr/bin/env bash
# Builds every test binary of the workspace (`cargo test --no-run`) before `make unit` runs them,
# with cargo's output kept in target/build-tests.log. On failure it prints, as the last lines of
# the log a CI run shows, the first compiler or linker errors and the machine's free disk and
# memory: a build that dies of a full disk (ld: Bus error) or of the OOM killer says so there,
# instead of only "cargo test --no-run exited with code 101".
#
#   scripts/build_tests.sh [cargo args...]     e.g. --locked
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOG="$ROOT/target/build-tests.log"
CARGO="${CARGO:-cargo}"
mkdir -p "$ROOT/target"

# Downloads first, retried: a registry hiccup on a fresh machine is not a build failure.
for try in 1 2 3; do
  "$CARGO" fetch "$@" >/dev/null 2>&1 && break
  [ "$try" = 3 ] && { echo "build-tests: cargo fetch failed three times:" >&2; "$CARGO" fetch "$@"; exit 1; }
  echo "build-tests: cargo fetch failed (try $try of 3); retrying in $((try * 10)) s" >&2
  sleep $((try * 10))
done

"$CARGO" test --workspace --no-run "$@" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  {
    echo
    echo "build-tests: cargo test --no-run failed (exit $status); its first errors:"
    grep -n -A12 -E '^error(\[E[0-9]+\])?:|Bus error|No space left|signal: 9|SIGKILL|collect2' "$LOG" | head -60
    echo "build-tests: free disk and memory at the failure:"
    df -h "$ROOT" "$ROOT/target" /tmp 2>/dev/null | awk '!seen[$0]++'
    free -m 2>/dev/null || true
    du -sh "$ROOT/target" "$ROOT/.libtorch" 2>/dev/null
  } >&2
  exit "$status"
fi
