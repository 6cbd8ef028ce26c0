#!/usr/bin/env bash
# The pure core (jetvit_mm.models, search, distill, benchmark, deploy, depth) on the oldest stack it supports: the
# GPU machine's image, torch 2.11 + Triton 3.6 + timm 1.0.29 (seen there 2026-12-04), without OpenMMLab.
#
#   bash scripts/test_min_torch.sh        # or: make test-min-torch
#
# Creates .venv-torch2.11 (python3.12 where there is one, as on the GPU machine; else python3.11), installs that
# stack and this package without its dependencies, and runs the test files listed in tests/pure_core_tests.txt
# (those that need no OpenMMLab). Idempotent: a second run only runs the tests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${JETVIT_MIN_VENV:-$ROOT/.venv-torch2.11}"
TORCH=2.11.0 TRITON=3.6.0 TIMM=1.0.29

log() { printf '[test-min-torch] %s\n' "$*"; }

pick_python() {  # python3.12 (the GPU image's), through pyenv where it is installed but not global; else 3.11
  if command -v python3.12 >/dev/null 2>&1 && python3.12 -c '' 2>/dev/null; then echo python3.12; return; fi
  if command -v pyenv >/dev/null 2>&1; then
    local v
    v=$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$' | tail -n 1 || true)
    if [ -n "$v" ]; then echo "$(pyenv root)/versions/$v/bin/python3.12"; return; fi
  fi
  echo python3.11
}

if [ ! -x "$VENV/bin/python" ]; then
  PYTHON="${PYTHON:-$(pick_python)}"
  log "creating $VENV with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --disable-pip-version-check -q)

if ! "$PY" - "$TORCH" "$TRITON" "$TIMM" <<'PYEOF' 2>/dev/null; then
import sys
from importlib.metadata import version
torch, triton, timm = sys.argv[1:]
sys.exit(0 if (version('torch').split('+')[0], version('triton'), version('timm')) == (torch, triton, timm) else 1)
PYEOF
  log "installing torch $TORCH, Triton $TRITON, timm $TIMM and the test tools"
  "${PIP[@]}" "torch==$TORCH" "triton==$TRITON" "timm==$TIMM" numpy safetensors pillow matplotlib \
    onnx onnxscript onnxruntime pytest pytest-xdist
fi
"${PIP[@]}" --no-deps --no-build-isolation -e "$ROOT"
"$PY" -c 'import sys, torch, triton, timm; print(f"[test-min-torch] python {sys.version.split()[0]}, torch {torch.__version__}, Triton {triton.__version__}, timm {timm.__version__}")'

cd "$ROOT"
mapfile -t files < <(grep -v -E '^\s*(#|$)' tests/pure_core_tests.txt)
"$PY" -m pytest -q -n 2 --dist loadfile -p no:cacheprovider "${files[@]}"
