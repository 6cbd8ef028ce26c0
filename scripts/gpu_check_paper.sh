#!/usr/bin/env bash
# The paper's other rows on a lent GPU (issue 39 item 6), in one call of the device tool beside scripts/gpu_check.sh:
#
#     bash scripts/gpu_check_paper.sh "$OUT"      # `run` command: bash scripts/gpu_check_paper.sh "$OUT"; timeout_s 480
#
# DINOv3-L with two F layers (the paper's placement: layers 14 and 22) and DepthAnythingV2-L with its DPT head
# (F at layers 13 and 17) at the paper's 1024x2048 inputs (1022x2044 for the 14-pixel patches), bf16, CUDA graphs:
# batch-1 latency beside the images/s at batch 8; DINOv3-L's teacher and 2F compiled too, and DINOv3-B's all-L
# compiled (the device check compiles its teacher and 2F), so that every row has the compiled teacher beside the
# eager one. Budgets in seconds on one H200 (a cold compile of a ViT-B ~55-60 s there; ViT-L assumed about 1.5x),
# 420 s in all; each phase prints as it goes and $OUT/gpu_check_paper.tgz is packed after each.
#
#   | phase       | budget | what                                                                            |
#   |-------------|-------:|---------------------------------------------------------------------------------|
#   | env         |     15 | versions, GPU                                                                   |
#   | dinov3_l    |     60 | DINOv3-L teacher / 2F, 1024x2048, latency at batch 1 and images/s at batch 8   |
#   | depth_l     |     70 | DepthAnythingV2-L teacher / 2F with the DPT head, 1022x2044, the same          |
#   | dinov3_l_c  |    180 | DINOv3-L teacher / 2F compiled, CUDA graphs, batch 1                            |
#   | dinov3_b_c  |     85 | DINOv3-B teacher / all-L compiled, CUDA graphs, batch 1                         |
#   | baselines   |     10 | DINOv3-L's archs against its eager and its compiled teacher                     |
#
# CPU dry run (tests/test_gpu_check.py): DRY_RUN=1 bash scripts/gpu_check_paper.sh OUT, small models, tiny sizes.
set -uo pipefail
CHECK_NAME=gpu_check_paper
source "$(dirname "$0")/gpu_check_common.sh"
depth_2f=LWLLWWLWLLWWLFLLWFLWLLWW  # DepthAnythingV2-L: F at layers 13 and 17 (the paper's search)

if [[ $dry == 1 ]]; then  # plumbing only: small models, tiny sizes, batch 2 for the throughput
    device=cpu large=dinov3_vits16 depth_model=dinov2_vits14 base=dinov3_vits16 size=(64 128) depth_size=(70 126)
    graph=() repeat=1 warmup=0 batch=2 depth_2f=LWLLWWLWLFLF scale=5
    large_compiled=(--arch teacher) base_compiled=(--arch teacher)  # one compile each: the CPU compiles slowly
else
    device=cuda large=dinov3_vitl16 depth_model=dinov2_vitl14 base=dinov3_vitb16 size=(1024 2048)
    depth_size=(1022 2044) graph=(--cuda-graph) repeat=10 warmup=3 batch=8 scale=1
    large_compiled=(--arch teacher --arch 2F) base_compiled=(--arch teacher --arch all-L)
fi

models=(tools/benchmark.py models --device "$device" --dtype bf16 --warmup "$warmup" --repeat "$repeat" --no-memory
        "${graph[@]}")

phase env 15 "$py" tools/gpu_check.py env --json "$out/files/env.json"
phase dinov3_l 60 "$py" "${models[@]}" --model "$large" --size "${size[@]}" --arch teacher --arch 2F \
    --throughput "$batch" --json "$out/files/dinov3_l.json"
phase depth_l 70 "$py" "${models[@]}" --model "$depth_model" --head dpt --size "${depth_size[@]}" --arch teacher \
    --arch "$depth_2f" --throughput "$batch" --json "$out/files/depth_l.json"
phase dinov3_l_c 180 "$py" "${models[@]}" --model "$large" --size "${size[@]}" "${large_compiled[@]}" --compile \
    --json "$out/files/dinov3_l_compile.json"
phase dinov3_b_c 85 "$py" "${models[@]}" --model "$base" --size "${size[@]}" "${base_compiled[@]}" --compile \
    --json "$out/files/dinov3_b_compile.json"
phase baselines 10 "$py" tools/gpu_check.py baselines "$out/files/dinov3_l.json" "$out/files/dinov3_l_compile.json" \
    --json "$out/files/baselines_l.json"
echo "== done: $([[ $failed == 0 ]] && echo 'every phase passed' || echo 'a phase FAILED (see above)')" >> "$log"
tail -n 1 "$log"
exit "$failed"
