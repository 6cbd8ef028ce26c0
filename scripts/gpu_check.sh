#!/usr/bin/env bash
# The device check (issues 30, 39, 46): the default GPU path proven in one call on a lent GPU machine, with the device
# image's own python3 (torch, timm, Triton; no mmengine needed). Run it through the device tool as
#
#     bash scripts/gpu_check.sh "$OUT"            # `run` command: bash scripts/gpu_check.sh "$OUT"; timeout_s 480
#     bash scripts/gpu_check.sh --plan            # each phase, its budget and what it proves; runs nothing
#
# nothing to carry (the working tree travels; jetvit_mm's pure core needs torch >= 2.11 and timm only). The phases go
# in the order of what they prove, bf16 first, each under a budget in seconds on one H100, cold compiles included,
# set from the times measured on an H200 on 2026-12-04 (../shared/gpu/2026-12-04/README.md) and the compiles since:
# the first Flex call ~15 s and its backward ~10-15 s, a whole-model compile ~55-60 s, a Triton kernel ~1-2 s, a
# process's start and imports ~5 s; 420 s in all, the tool's start aside. Each phase prints as it goes (the kernel
# cases a line each), and $OUT's three files (scripts/gpu_check_common.sh) are rewritten after each: a phase that runs
# out of time leaves what it finished, and the later phases still run.
# In the second call, scripts/gpu_check_paper.sh: the compiled 2F and all-L, the kernel matrix, DINOv3-L and
# DepthAnythingV2-L. Exit code: 1 if any phase failed.
# CPU dry run (part of the test suite, so the script cannot rot): DRY_RUN=1 bash scripts/gpu_check.sh OUT, the same
# files at tiny sizes with gloo, Triton and Flex left out (the CPU has neither fast enough to run here).
set -uo pipefail
CHECK_NAME=gpu_check
source "$(dirname "$0")/gpu_check_common.sh"

if [[ $dry == 1 ]]; then  # plumbing only: tiny sizes, 'auto' (the torch paths at these sizes), one compile
    device=cpu size=(64 128) grid=(4 8) repeat=1 warmup=0 graph=() proof=(--quick) scale=5  # the CPU compiles slowly
    distill=(--model dinov3_vits16 --depth 2 --arch LW --size 32 48 --batch 1)
else
    device=cuda size=(1024 2048) grid=(64 128) repeat=10 warmup=3 graph=(--cuda-graph) proof=() scale=1
    distill=(--model dinov3_vitb16 --size 1024 2048 --batch 1 --arch 2F --arch all-L --arch all-W)
fi
files=$work/files
models=(tools/benchmark.py models --device "$device" --model dinov3_vitb16 --size "${size[@]}" --dtype bf16
        --warmup "$warmup" --repeat "$repeat" --no-memory "${graph[@]}")
mask_rcnn="if [[ $dry == 1 ]]; then echo 'dry run: the Mask R-CNN step is not run'; \
elif \"$py\" -c 'import mmcv.ops, mmdet, pytest' 2>/dev/null; then \"$py\" -m pytest -q -x \
    tests/test_detection.py; else echo 'Mask R-CNN step skipped: mmcv (with its ops), mmdet or pytest is not \
installed in this image'; fi"
dist=("$py" -m torch.distributed.run --standalone --nproc_per_node=1 tools/gpu_check.py dist)

phase env 15 'versions, the GPU, the SDPA backend of the teacher'"'"'s F layers (bf16, fp32)' \
    "$py" tools/gpu_check.py env --json "$files/env.json"
phase proof 100 'L Triton and W Flex at 64x128 (ViT-B heads) vs the torch path, forward and backward; the 2F model:
                      forward, gradient, an autocast training step; bf16; fails unless the fast paths ran' \
    "$py" tools/gpu_check.py kernels --device "$device" --production "${proof[@]}" --log "$files/kernels.log" \
    --json "$files/kernels.json"
phase mixers 45 'the mixer table at 64x128, bf16, CUDA graphs, auto (L <= 0.12 of F, W <= 0.17 of F)' \
    "$py" tools/benchmark.py mixers --device "$device" --dtype bf16 --grid "${grid[@]}" --warmup "$warmup" \
    --repeat "$repeat" "${graph[@]}" --kernel auto --json "$files/mixers_bf16.json"
phase models 40 'teacher / 2F / all-L / all-W at 1024x2048, bf16, CUDA graphs, per-block profile' \
    "$py" "${models[@]}" --arch teacher --arch 2F --arch all-L --arch all-W --profile --json "$files/models_bf16.json"
phase teacher_c 75 'the teacher compiled, CUDA graphs (the fair baseline; a cold compile ~55-60 s)' \
    "$py" "${models[@]}" --arch teacher --compile --json "$files/models_bf16_compile.json"
phase baselines 5 'every arch against the eager and the compiled teacher (2F >= x2.2 / x1.9, all-L >= x2.9 / x2.4)' \
    "$py" tools/gpu_check.py baselines "$files/models_bf16.json" "$files/models_bf16_compile.json" \
    --json "$files/baselines.json"
phase distill 90 'the bf16 distillation step, fast vs torch paths, 2F / all-L / all-W, 1024x2048 (>= x1.3)' \
    "$py" tools/benchmark.py distill-kernels --device "$device" "${distill[@]}" --dtype bf16 --warmup 1 --repeat 3 \
    --json "$files/distill_bf16.json"
phase ddp 15 'one distillation step of a tiny supernet on NCCL through DDP, torch paths (own process)' \
    "${dist[@]}" --wrap ddp --json "$files/dist_ddp.json"
phase fsdp2 25 'the same through FSDP2 (own process)' "${dist[@]}" --wrap fsdp2 --json "$files/dist_fsdp2.json"
phase mask_rcnn 5 'the Mask R-CNN tests where mmcv'"'"'s CUDA ops exist, else a line saying why not' \
    bash -c "$mask_rcnn"
finish
