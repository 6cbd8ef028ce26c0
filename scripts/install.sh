#!/usr/bin/env bash
# Idempotent installer for jetvit_mm (x86_64, Python 3.11, CPU or GPU).
#
#   bash scripts/install.sh          # creates .venv and installs everything
#
# mmcv 2.1.0 has no wheel for torch 2.14 on the registry: it is built from the sdist (two fixes:
# setuptools<70 without build isolation, and -std=c++20 for torch's headers). Its ops are built for
# CUDA too (FORCE_CUDA=1: Mask R-CNN's RoIAlign and NMS on the GPU) when a GPU and nvcc are both
# present, CPU-only otherwise; JETVIT_MMCV_OPS=cpu|cuda overrides the choice. The wheel is cached in
# $JETVIT_WHEEL_CACHE/<cpu|cuda> (default ~/.cache/jetvit_mm/wheels) so later installs on the same
# machine take seconds, and a CPU build is never reused on a GPU machine or the other way round.
#
#   bash scripts/install.sh --mmcv-ops    # print which ops would be built (cpu or cuda) and exit
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${JETVIT_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
MMCV_VERSION=2.1.0

log() { printf '[install] %s\n' "$*"; }

mmcv_ops() {  # cuda when a GPU and nvcc are both there (or JETVIT_MMCV_OPS says so), cpu otherwise
  case "${JETVIT_MMCV_OPS:-auto}" in
    cpu|cuda) echo "$JETVIT_MMCV_OPS"; return ;;
    auto) ;;
    *) echo "JETVIT_MMCV_OPS=$JETVIT_MMCV_OPS: valid values are cpu, cuda or auto" >&2; return 2 ;;
  esac
  if command -v nvcc >/dev/null 2>&1 && command -v nvidia-smi >/dev/null 2>&1 \
      && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo cuda
  else
    echo cpu
  fi
}
OPS="$(mmcv_ops)"
if [ "${1:-}" = "--mmcv-ops" ]; then
  echo "$OPS"
  exit 0
fi
WHEELS="${JETVIT_WHEEL_CACHE:-$HOME/.cache/jetvit_mm/wheels}/$OPS"

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip install --disable-pip-version-check -q)

have() {  # have PKG VERSION -> installed at exactly that version
  "$PY" - "$1" "$2" <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if version(sys.argv[1]) == sys.argv[2] else 1)
PYEOF
}

# 1. torch (the CUDA build also runs on the CPU; the only one paired with a torchvision here).
if ! have torch 2.14.1 || ! have torchvision 0.29.1; then
  log "installing torch 2.14.1 + torchvision 0.29.1"
  "${PIP[@]}" torch==2.14.1 torchvision==0.29.1
fi

# 2. mmcv 2.1.0 with ops, from the wheel cache or built once.
if ! have mmcv "$MMCV_VERSION"; then
  mkdir -p "$WHEELS"
  wheel=$(ls "$WHEELS"/mmcv-"$MMCV_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
  if [ -z "$wheel" ] && [ "$OPS" = cpu ]; then  # a wheel cached before the cpu/cuda folders was a CPU build
    wheel=$(ls "$(dirname "$WHEELS")"/mmcv-"$MMCV_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
  fi
  if [ -z "$wheel" ]; then
    log "building mmcv $MMCV_VERSION with $OPS ops (CPU ops: about 9 minutes on 2 cores, once per machine)"
    build="$(mktemp -d)"
    # mmcv's setup.py needs pkg_resources and an old setuptools; requirements.txt restores torch's pin after
    "${PIP[@]}" 'setuptools<70' wheel ninja packaging
    "$PY" -m pip download --no-deps --no-binary :all: -d "$build" "mmcv==$MMCV_VERSION" -q
    tar -xzf "$build"/mmcv-"$MMCV_VERSION".tar.gz -C "$build"
    src="$build/mmcv-$MMCV_VERSION"
    sed -i -e 's/-std=c++14/-std=c++20/g' -e 's/-std=c++17/-std=c++20/g' "$src/setup.py"
    (cd "$src" && MMCV_WITH_OPS=1 FORCE_CUDA="$([ "$OPS" = cuda ] && echo 1 || echo 0)" MAX_JOBS="$(nproc)" \
      "$PY" -m pip wheel --no-build-isolation --no-deps -w "$WHEELS" . -q)
    rm -rf "$build"
    wheel=$(ls "$WHEELS"/mmcv-"$MMCV_VERSION"-*.whl | head -n 1)
  else
    log "using cached $wheel"
  fi
  "${PIP[@]}" --no-deps "$wheel"
fi

# 3. the rest of the stack, then this package in editable mode.
log "installing OpenMMLab stack, timm and test tools"
"${PIP[@]}" -r "$ROOT/requirements.txt"
"${PIP[@]}" --no-build-isolation --no-deps -e "$ROOT"
# 4. the deploy extra (ONNX export and its onnxruntime tests): setup.py's extras_require['deploy']
log "installing the deploy extra (onnx, onnxscript, onnxruntime)"
"${PIP[@]}" 'onnx==1.23.2' 'onnxscript==0.7.2' 'onnxruntime==1.32.0'
"$PY" -c "import mmcv.ops, mmseg.models, mmdet.models, timm, jetvit_mm; print('[install] ok: mmcv', mmcv.__version__, '| mmseg', __import__('mmseg').__version__, '| mmdet', __import__('mmdet').__version__, '| timm', timm.__version__, '| torch', __import__('torch').__version__)"
