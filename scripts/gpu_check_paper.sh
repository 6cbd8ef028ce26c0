#!/usr/bin/env bash
# The device check's second call (issues 39, 46): what does not fit the first (scripts/gpu_check.sh), in one call of
# the device tool:
#
#     bash scripts/gpu_check_paper.sh "$OUT"      # `run` command: bash scripts/gpu_check_paper.sh "$OUT"; timeout_s 480
#     bash scripts/gpu_check_paper.sh --plan      # each phase, its budget and what it proves; runs nothing
#
# The fast paths' case matrix (L Triton and W Flex over prefix, RoPE layout, conv, batch and grid; bf16), DINOv3-B's
# 2F and all-L compiled (the first call compiles its teacher: `tools/gpu_check.py baselines` over both calls' models
# JSONs gives every arch against the compiled teacher), and the paper's other rows: DINOv3-L with two F layers (the
# paper's placement: layers 14 and 22) and DepthAnythingV2-L with its DPT head (F at layers 13 and 17) at the paper's
# 1024x2048 inputs (1022x2044 for the 14-pixel patches), bf16, CUDA graphs, batch-1 latency beside the images/s at
# batch 8. Budgets in seconds on one H100 as in scripts/gpu_check.sh (ViT-L assumed 1.5x ViT-B), 420 s at most;
# $OUT's three files as there. Not here (no call has room): DINOv3-L compiled.
# CPU dry run (tests/test_gpu_check.py): DRY_RUN=1 bash scripts/gpu_check_paper.sh OUT, small models, tiny sizes.
set -uo pipefail
CHECK_NAME=gpu_check_paper
source "$(dirname "$0")/gpu_check_common.sh"
depth_2f=LWLLWWLWLLWWLFLLWFLWLLWW  # DepthAnythingV2-L: F at layers 13 and 17 (the paper's search)

if [[ $dry == 1 ]]; then  # plumbing only: small models, tiny sizes, batch 2 for the throughput
    device=cpu large=dinov3_vits16 depth_model=dinov2_vits14 base=dinov3_vits16 size=(64 128) depth_size=(70 126)
    graph=() repeat=1 warmup=0 batch=2 depth_2f=LWLLWWLWLFLF scale=5 matrix=(--quick --kernel compile)
    base_compiled=(--arch 2F)  # one compile: the CPU compiles slowly
else
    device=cuda large=dinov3_vitl16 depth_model=dinov2_vitl14 base=dinov3_vitb16 size=(1024 2048)
    depth_size=(1022 2044) graph=(--cuda-graph) repeat=10 warmup=3 batch=8 scale=1
    matrix=(--kernel triton --kernel flex) base_compiled=(--arch 2F --arch all-L)
fi
files=$work/files
models=(tools/benchmark.py models --device "$device" --dtype bf16 --warmup "$warmup" --repeat "$repeat" --no-memory
        "${graph[@]}")

phase env 15 'versions, the GPU' "$py" tools/gpu_check.py env --json "$files/env.json"
phase kernels 100 'the case matrix: L Triton and W Flex vs the torch path over prefix, RoPE, conv, batch, grid; bf16' \
    "$py" tools/gpu_check.py kernels --device "$device" --dtype bf16 "${matrix[@]}" --log "$files/kernels.log" \
    --json "$files/kernels_matrix.json"
phase b_compiled 120 'DINOv3-B 2F and all-L compiled, CUDA graphs, 1024x2048 (two cold compiles)' \
    "$py" "${models[@]}" --model "$base" --size "${size[@]}" "${base_compiled[@]}" --compile \
    --json "$files/dinov3_b_compile.json"
phase dinov3_l 60 'DINOv3-L teacher / 2F at 1024x2048: latency at batch 1, images/s at batch 8' \
    "$py" "${models[@]}" --model "$large" --size "${size[@]}" --arch teacher --arch 2F --throughput "$batch" \
    --json "$files/dinov3_l.json"
phase depth_l 70 'DepthAnythingV2-L teacher / 2F with the DPT head at 1022x2044, the same' \
    "$py" "${models[@]}" --model "$depth_model" --head dpt --size "${depth_size[@]}" --arch teacher \
    --arch "$depth_2f" --throughput "$batch" --json "$files/depth_l.json"
finish
