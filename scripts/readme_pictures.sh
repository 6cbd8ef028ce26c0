#!/usr/bin/env bash
# The README's "Use a trained model" pictures, written by tools/infer.py on the models of a `make demo` run (tiny
# models on generated 64x128 images: the pictures show what the tool writes, not a quality claim).
#   bash scripts/readme_pictures.sh [DEMO_WORK_DIR (default work_dirs/demo)] [OUT (default docs/images)]
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO=${1:-work_dirs/demo}
OUT=${2:-docs/images}
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # one thread, as the demo times (steadier on a shared machine)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

TEACHER=$DEMO/pipeline/probe_teacher/iter_300.pth      # linear probe on the all-F teacher
STEP1=$DEMO/pipeline/probe_step1/iter_300.pth          # linear probe on the fine-tuned Step-1 hybrid (L + W only)
EXPORTED=$(ls "$DEMO"/pipeline/search/hybrid_*_with_head.pth | head -n 1)  # tools/search.py --export, 2 F layers
IMAGE=$(ls "$DEMO"/data/context_seg/leftImg8bit/val/*/*.png | head -n 1)
for f in "$TEACHER" "$STEP1" "$EXPORTED" "$IMAGE"; do
    [ -f "$f" ] || { echo "missing $f: run make demo (tools/demo.py --work-dir $DEMO) first" >&2; exit 1; }
done
STEM=$(basename "$IMAGE" .png)

# no config: both checkpoints carry theirs
$PY tools/infer.py "$EXPORTED" "$IMAGE" --out-dir "$TMP/plain"
$PY tools/infer.py "$STEP1" "$IMAGE" --out-dir "$TMP/compare" --compare "$TEACHER" --pca --repeat 20

mkdir -p "$OUT"
cp "$TMP/plain/${STEM}_overlay.png" "$OUT/infer_overlay.png"
# no infer_compare.png: at the demo's toy size its latencies mean nothing (the README says so)
cp "$TMP/compare/${STEM}_pca.png" "$OUT/infer_pca.png"
sed "s#$DEMO/#<demo work dir>/#g" "$TMP/compare/compare.json" > "$OUT/infer_compare.json"
echo "wrote $OUT/infer_{overlay,pca}.png and $OUT/infer_compare.json (image: $IMAGE)"
