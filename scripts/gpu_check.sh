#!/usr/bin/env bash
# The device check (issue 30): the default GPU path proven in one short run on a lent GPU machine, with the device
# image's own python3 (torch, timm, Triton; no mmengine needed). Run it through the device tool as
#
#     bash scripts/gpu_check.sh "$OUT"            # `run` command: bash scripts/gpu_check.sh "$OUT"; timeout_s 480
#
# nothing to carry (the working tree travels; jetvit_mm's pure core needs torch >= 2.11 and timm only).
# Phases, in order, each under its own time budget (seconds on one H200; 360 s in all, compiles included):
#
#   | phase   | budget | what                                                                              |
#   |---------|-------:|-----------------------------------------------------------------------------------|
#   | env     |     20 | versions, GPU, the SDPA backend of the teacher's F layers (bf16 and fp32)           |
#   | kernels |     80 | every fast path vs the torch path on CUDA, fp32 and bf16 (kernel_check.py), the   |
#   |         |        | whole 2F model 'auto' vs torch, forward and backward (L Triton, W Flex: the       |
#   |         |        | input's gradient, '-grad' cases); exit 1 on a mismatch                            |
#   | mixers  |     45 | the mixer table, bf16, CUDA graphs, every fast kernel                             |
#   | models  |     75 | teacher / 2F / all-L / all-W at 1024x2048 bf16 with CUDA graphs + per-block profile |
#   |         |        | (the teacher with cuDNN attention too; ratios against the fastest teacher)         |
#   | compile |     90 | teacher / 2F / all-L compiled (teacher compiled too), bf16, 1024x2048, each       |
#   |         |        | compiled model captured in CUDA graphs (--compile --cuda-graph)                   |
#   | dist    |     40 | one distillation step of a tiny supernet under torchrun on NCCL: DDP, then FSDP2  |
#   | mask_rcnn |   10 | the Mask R-CNN tests where mmcv's CUDA ops exist, else a line saying why not      |
#
# After every phase $OUT/gpu_check.tgz is packed again (every file written so far), so a timeout keeps what ran;
# $OUT/run.log has every phase's output, its exit code and its seconds. Exit code: 1 if any phase failed.
# CPU dry run (part of the test suite, so the script cannot rot): DRY_RUN=1 bash scripts/gpu_check.sh OUT, the same
# files at tiny sizes with gloo, Triton and Flex left out (the CPU has neither fast enough to run here).
set -uo pipefail
out=${1:?usage: bash scripts/gpu_check.sh OUT}
py=${PYTHON:-python3}
dry=${DRY_RUN:-0}
cd "$(dirname "$0")/.."
mkdir -p "$out/files"
out=$(cd "$out" && pwd)
log="$out/run.log"
: > "$log"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
failed=0

if [[ $dry == 1 ]]; then  # plumbing only: tiny sizes, 'auto' (the torch paths at these sizes), one compile each
    device=cpu size=(64 128) grid=(4 8) repeat=1 warmup=0 kernels=(--kernel auto) graph=()
    check=(--quick --dtype fp32) compiled=(--arch teacher) scale=5  # budgets x5: the CPU compiles slowly
else
    device=cuda size=(1024 2048) grid=(64 128) repeat=10 warmup=3 graph=(--cuda-graph) check=() scale=1
    kernels=(--kernel auto --kernel triton --kernel flex --kernel compile)
    compiled=(--arch teacher --arch 2F --arch all-L)
fi

phase() {  # phase NAME BUDGET COMMAND...: run it under its budget, log it, pack what exists
    local name=$1 budget=$(( $2 * scale )) start rc
    shift 2
    start=$(date +%s)
    echo "== phase $name (budget ${budget} s): $*" >> "$log"
    timeout "$budget" "$@" >> "$log" 2>&1
    rc=$?
    echo "== phase $name: rc $rc, $(( $(date +%s) - start )) s$([[ $rc == 124 ]] && echo ' (TIMED OUT)')" >> "$log"
    [[ $rc == 0 ]] || failed=1
    tar -czf "$out/gpu_check.tgz.tmp" -C "$out" files run.log && mv "$out/gpu_check.tgz.tmp" "$out/gpu_check.tgz"
    tail -n 1 "$log"
}

models=(tools/benchmark.py models --device "$device" --model dinov3_vitb16 --size "${size[@]}" --dtype bf16
        --warmup "$warmup" --repeat "$repeat" --no-memory)
mask_rcnn="if [[ $dry == 1 ]]; then echo 'dry run: the Mask R-CNN step is not run'; \
elif \"$py\" -c 'import mmcv.ops, mmdet, pytest' 2>/dev/null; then \"$py\" -m pytest -q -x \
    tests/test_detection.py; else echo 'Mask R-CNN step skipped: mmcv (with its ops), mmdet or pytest is not \
installed in this image'; fi"

phase env 20 "$py" tools/gpu_check.py env --json "$out/files/env.json"
phase kernels 80 "$py" tools/gpu_check.py kernels --device "$device" "${check[@]}" --json "$out/files/kernels.json"
phase mixers 45 "$py" tools/benchmark.py mixers --device "$device" --dtype bf16 --grid "${grid[@]}" \
    --warmup "$warmup" --repeat "$repeat" "${graph[@]}" "${kernels[@]}" --json "$out/files/mixers_bf16.json"
phase models 75 "$py" "${models[@]}" --arch teacher --arch 2F --arch all-L --arch all-W "${graph[@]}" --profile \
    --json "$out/files/models_bf16.json"
phase compile 90 "$py" "${models[@]}" "${compiled[@]}" --compile "${graph[@]}" \
    --json "$out/files/models_bf16_compile.json"
phase dist 40 "$py" -m torch.distributed.run --standalone --nproc_per_node=1 tools/gpu_check.py dist --wrap ddp \
    --wrap fsdp2 --json "$out/files/dist.json"
phase mask_rcnn 10 bash -c "$mask_rcnn"
echo "== done: $([[ $failed == 0 ]] && echo 'every phase passed' || echo 'a phase FAILED (see above)')" >> "$log"
tail -n 1 "$log"
exit "$failed"
