#!/usr/bin/env bash
# The device check (issues 30, 39): the default GPU path proven in one call on a lent GPU machine, with the device
# image's own python3 (torch, timm, Triton; no mmengine needed). Run it through the device tool as
#
#     bash scripts/gpu_check.sh "$OUT"            # `run` command: bash scripts/gpu_check.sh "$OUT"; timeout_s 480
#
# nothing to carry (the working tree travels; jetvit_mm's pure core needs torch >= 2.11 and timm only).
# Phases, in order, bf16 first, each under its own time budget (seconds on one H200, set from the times measured
# there on 2026-12-04, cold compiles included: ../shared/gpu/2026-12-04/README.md; 420 s in all, the tool's start
# aside). Every phase prints as it goes (the kernel check a line per case, also appended to files/kernels.log), so a
# phase that runs out of time leaves what it finished:
#
#   | phase     | budget | what                                                                              |
#   |-----------|-------:|-----------------------------------------------------------------------------------|
#   | env       |     15 | versions, GPU, the SDPA backend of the teacher's F layers (bf16 and fp32)         |
#   | kernels   |     95 | the fast paths vs the torch path on CUDA (kernel_check.py): L Triton, W Flex and  |
#   |           |        | the whole 2F model on 'auto', bf16 forward and backward, then fp32's backward     |
#   |           |        | cases (TF32 off); a case whose fast path did not run fails; exit 1 on a failure   |
#   | mixers    |     35 | the mixer table, bf16, CUDA graphs, 'auto' (the fast kernels)                     |
#   | models    |     35 | teacher / 2F / all-L / all-W at 1024x2048 bf16 with CUDA graphs + per-block       |
#   |           |        | profile (the teacher with cuDNN attention too)                                    |
#   | compile   |    125 | teacher and 2F compiled (a cold compile ~55-60 s each), captured in CUDA graphs   |
#   | baselines |      5 | every arch against the eager and the compiled teacher (models + compile JSONs)    |
#   | distill   |     40 | the bf16 distillation step, fast vs torch paths, 2F, all-L, all-W, 1024x2048      |
#   | ddp       |     25 | one distillation step of a tiny supernet under torchrun on NCCL, DDP (own process)|
#   | fsdp2     |     40 | the same through FSDP2 (own process)                                              |
#   | mask_rcnn |      5 | the Mask R-CNN tests where mmcv's CUDA ops exist, else a line saying why not      |
#
# Not here (they do not fit the same call): the kernel check's fp32 forward and 'compile' cases, the third compiled
# model (all-L), the paper's other rows (scripts/gpu_check_paper.sh).
# After every phase $OUT/gpu_check.tgz is packed again (every file written so far), so a timeout keeps what ran;
# $OUT/run.log has every phase's output, its exit code and its seconds. Exit code: 1 if any phase failed.
# CPU dry run (part of the test suite, so the script cannot rot): DRY_RUN=1 bash scripts/gpu_check.sh OUT, the same
# files at tiny sizes with gloo, Triton and Flex left out (the CPU has neither fast enough to run here).
set -uo pipefail
CHECK_NAME=gpu_check
source "$(dirname "$0")/gpu_check_common.sh"

if [[ $dry == 1 ]]; then  # plumbing only: tiny sizes, 'auto' (the torch paths at these sizes), one compile each
    device=cpu size=(64 128) grid=(4 8) repeat=1 warmup=0 graph=()
    check=(--quick --dtype fp32) compiled=(--arch teacher) scale=5  # budgets x5: the CPU compiles slowly
    distill=(--model dinov3_vits16 --depth 2 --arch LW --size 32 48 --batch 1)
else
    device=cuda size=(1024 2048) grid=(64 128) repeat=10 warmup=3 graph=(--cuda-graph) scale=1
    check=(--dtype bf16 --dtype fp32 --fp32 grad --kernel triton --kernel flex --kernel auto)
    compiled=(--arch teacher --arch 2F)
    distill=(--model dinov3_vitb16 --size 1024 2048 --batch 1 --arch 2F --arch all-L --arch all-W)
fi

models=(tools/benchmark.py models --device "$device" --model dinov3_vitb16 --size "${size[@]}" --dtype bf16
        --warmup "$warmup" --repeat "$repeat" --no-memory)
mask_rcnn="if [[ $dry == 1 ]]; then echo 'dry run: the Mask R-CNN step is not run'; \
elif \"$py\" -c 'import mmcv.ops, mmdet, pytest' 2>/dev/null; then \"$py\" -m pytest -q -x \
    tests/test_detection.py; else echo 'Mask R-CNN step skipped: mmcv (with its ops), mmdet or pytest is not \
installed in this image'; fi"

dist=("$py" -m torch.distributed.run --standalone --nproc_per_node=1 tools/gpu_check.py dist)

phase env 15 "$py" tools/gpu_check.py env --json "$out/files/env.json"
phase kernels 95 "$py" tools/gpu_check.py kernels --device "$device" "${check[@]}" --log "$out/files/kernels.log" \
    --json "$out/files/kernels.json"
phase mixers 35 "$py" tools/benchmark.py mixers --device "$device" --dtype bf16 --grid "${grid[@]}" \
    --warmup "$warmup" --repeat "$repeat" "${graph[@]}" --kernel auto --json "$out/files/mixers_bf16.json"
phase models 35 "$py" "${models[@]}" --arch teacher --arch 2F --arch all-L --arch all-W "${graph[@]}" --profile \
    --json "$out/files/models_bf16.json"
phase compile 125 "$py" "${models[@]}" "${compiled[@]}" --compile "${graph[@]}" \
    --json "$out/files/models_bf16_compile.json"
phase baselines 5 "$py" tools/gpu_check.py baselines "$out/files/models_bf16.json" \
    "$out/files/models_bf16_compile.json" --json "$out/files/baselines.json"
phase distill 40 "$py" tools/benchmark.py distill-kernels --device "$device" "${distill[@]}" --dtype bf16 \
    --warmup 1 --repeat 3 --json "$out/files/distill_bf16.json"
phase ddp 25 "${dist[@]}" --wrap ddp --json "$out/files/dist_ddp.json"
phase fsdp2 40 "${dist[@]}" --wrap fsdp2 --json "$out/files/dist_fsdp2.json"
phase mask_rcnn 5 bash -c "$mask_rcnn"
echo "== done: $([[ $failed == 0 ]] && echo 'every phase passed' || echo 'a phase FAILED (see above)')" >> "$log"
tail -n 1 "$log"
exit "$failed"
