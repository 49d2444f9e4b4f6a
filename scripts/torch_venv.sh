# Sourced (not run) by the scripts that make a Python venv around the torch in .libtorch:
# scripts/hf_venv.sh, scripts/sb3_venv.sh, scripts/trl_venv.sh. It holds what they share:
#
#   torch_venv_ready ARGS  with --check: exit 0 if the venv imports what it must, else 1; without:
#                        exit 0 (saying so) if the venv is present, stamped and importing.
#   torch_venv_install   check the prerequisites, then make "$VENV" afresh: pip-install "${PINS[@]}"
#                        pinned with --no-deps (pip never fetches a second torch), compile the
#                        CUDA stand-ins (scripts/cuda_stubs.py) and put them, then .libtorch, on
#                        the venv's path through two .pth files (they run in name order).
#
# Expects ROOT, VENV, LIBTORCH_ROOT, PINS, STAMP and the functions `say` and `check` from the
# sourcing script.
# PyPI's torch build names cuDNN, cuBLAS, NCCL and more that a CPU machine lacks ("libcudnn.so.9:
# cannot open shared object file"); the stand-ins (well under 1 MB) replace the ~3 GB of nvidia-*
# wheels for code that never runs here. Needs python3 (3.10+), a C compiler and readelf.

torch_venv_install() {
  [ -f "$LIBTORCH_ROOT/torch/lib/libtorch_cpu.so" ] || { say "no torch in .libtorch: run scripts/setup.sh libtorch first"; exit 1; }
  local tool
  for tool in python3 cc readelf; do
    command -v "$tool" >/dev/null || { say "$tool is missing (apt-get install python3-venv gcc binutils)"; exit 1; }
  done
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check --no-deps --no-compile "${PINS[@]}"
  local site
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  say "compiling stand-ins for the CUDA libraries torch names (scripts/cuda_stubs.py)"
  python3 "$ROOT/scripts/cuda_stubs.py" "$LIBTORCH_ROOT" "$VENV/cuda-stubs" >/dev/null
  cat >"$site/reagent_cuda_stubs.py" <<PY
"""Loads the CUDA stand-ins of scripts/cuda_stubs.py globally, before torch needs them."""
import ctypes, pathlib
for lib in sorted(pathlib.Path("$VENV/cuda-stubs").glob("lib*")):
    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
PY
  echo "import reagent_cuda_stubs" >"$site/00-reagent-cuda-stubs.pth"
  echo "$LIBTORCH_ROOT" >"$site/01-reagent-libtorch.pth"
}

torch_venv_ready() {
  if [ "${1:-}" = --check ]; then
    [ -x "$VENV/bin/python" ] && check
    exit
  fi
  if [ -f "$STAMP" ] && check; then
    say "present in ${VENV#"$ROOT"/}"
    exit 0
  fi
}
