#!/usr/bin/env bash
# The prepared GPU check of issue 10: teacher vs hybrids (2F, all-L, all-W) at 512x1024 and 1024x2048, fp32 and
# bf16, batch 1 latency + throughput + peak memory + FLOPs, then the per-mixer table. One command, for a lent GPU
# machine that has torch + timm + matplotlib but not this project's venv (jetvit_mm.models needs no mmengine):
#
#     bash scripts/gpu_benchmark.sh "$OUT"              # on the device machine; ~5-8 min on one H200
#     DEVICE=cpu SIZES="64 128" MIXER_GRID="4 8" REPEAT=1 WARMUP=0 bash scripts/gpu_benchmark.sh /tmp/smoke   # a dry run here
#
# Writes into the folder given (default work_dirs/benchmarks/gpu), at most 8 files: env.txt, run.log,
# models_{fp32,bf16}.json, scaling_{fp32,bf16}.png, mixers_{fp32,bf16}.json. Record the figures, the date and the
# device in docs/benchmarks.md by hand: nothing here writes docs.
set -euo pipefail
out=${1:-work_dirs/benchmarks/gpu}
device=${DEVICE:-cuda}
repeat=${REPEAT:-20}
warmup=${WARMUP:-5}
read -r -a sizes <<< "${SIZES:-512 1024 1024 2048}"
py=${PYTHON:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1

size_args=()
for ((i = 0; i < ${#sizes[@]}; i += 2)); do size_args+=(--size "${sizes[i]}" "${sizes[i + 1]}"); done

{
    date -u +'%Y-%m-%dT%H:%M:%SZ'
    "$py" -c 'import torch, timm, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "timm", timm.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")'
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
} > "$out/env.txt"
cat "$out/env.txt"

{
    for dtype in fp32 bf16; do
        echo "== models, $dtype"
        "$py" tools/benchmark.py models --device "$device" --dtype "$dtype" --model dinov3_vitb16 \
            --arch teacher --arch 2F --arch all-L --arch all-W "${size_args[@]}" --warmup "$warmup" \
            --repeat "$repeat" --throughput --json "$out/models_$dtype.json" --plot "$out/scaling_$dtype.png"
    done
    for dtype in fp32 bf16; do
        echo "== mixers, $dtype"
        "$py" tools/benchmark.py mixers --device "$device" --dtype "$dtype" --warmup "$warmup" --repeat "$repeat" \
            --grid ${MIXER_GRID:-64 128} --json "$out/mixers_$dtype.json"
    done
} 2>&1 | tee "$out/run.log"
