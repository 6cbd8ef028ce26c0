#!/usr/bin/env bash
# The prepared GPU check of issues 20 and 10. First issue 20's fast mixers (the default kernel switches, 'auto':
# Triton L kernels and FlexAttention W on CUDA) in bf16 at 1024x2048, batch 1: the mixer ratios L/F and W/F
# (CUDA graphs), DINOv3-B teacher vs 2F / all-L / all-W with CUDA graphs and with torch.compile (teacher compiled
# too), DINOv3-L 2F / all-L, DepthAnythingV2-L + DPT head 2F at 1036x2044. Then issue 10's reference set on the
# torch paths (linear_cfg.kernel=torch, window_kernel=torch): teacher vs hybrids at 512x1024 and 1024x2048, fp32
# and bf16 (L layers in fp32 or 'mixed' precision), eager and CUDA-graph replays, batch 1 latency + batch-8
# throughput + peak memory + FLOPs, then the per-mixer table. One command, for a lent GPU
# machine that has torch + timm + matplotlib but not this project's venv (jetvit_mm.models needs no mmengine):
#
#     bash scripts/gpu_benchmark.sh "$OUT"              # on the device machine; a few minutes on one H200
#     DEVICE=cpu SIZES="64 128" MIXER_GRID="4 8" REPEAT=1 WARMUP=0 THROUGHPUT=2 COMPILE_SIZE="64 128" \
#         DEPTH_SIZES="28 56" FAST_SIZE="64 128" FAST_DEPTH_SIZE="28 56" bash scripts/gpu_benchmark.sh /tmp/smoke
#     # (a dry run here: on the CPU the triton and flex mixer entries are left out, 'auto' takes the torch paths at
#     # these sizes, the 'compile' entries compile)
#
# Throughput is timed at a given batch (THROUGHPUT, default 8) rather than the largest that fits: on a 141 GB card
# the search for the largest batch alone would take minutes per arch at 1024x2048. Each phase runs even if an
# earlier one failed (its error is in run.log).
#
# Writes into the folder given (default work_dirs/benchmarks/gpu) 14 files (what the device tool brings back): env.txt,
# run.log, mixers_fast_bf16_graph.json, models_fast_*.json (4 phases), models_<phase>.json (6 reference phases, one
# of them the depth model with its DPT head), mixers_bf16_graph.json. Plot them with `tools/benchmark.py plot`.
# Record the figures, the date and the device in docs/benchmarks.md by hand: nothing here writes docs.
set -euo pipefail
out=${1:-work_dirs/benchmarks/gpu}
device=${DEVICE:-cuda}
repeat=${REPEAT:-10}
warmup=${WARMUP:-3}
throughput=${THROUGHPUT:-8}
read -r -a sizes <<< "${SIZES:-512 1024 1024 2048}"
py=${PYTHON:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1

size_args=()
for ((i = 0; i < ${#sizes[@]}; i += 2)); do size_args+=(--size "${sizes[i]}" "${sizes[i + 1]}"); done
read -r -a depth_sizes <<< "${DEPTH_SIZES:-518 1022 1036 2044}"  # multiples of 14: DA-2K-like and Cityscapes-like
depth_size_args=""
for ((i = 0; i < ${#depth_sizes[@]}; i += 2)); do depth_size_args+="--size ${depth_sizes[i]} ${depth_sizes[i + 1]} "; done

{
    date -u +'%Y-%m-%dT%H:%M:%SZ'
    "$py" -c 'import torch, timm, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "timm", timm.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")'
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
} > "$out/env.txt"
cat "$out/env.txt"

models() {  # models NAME [extra benchmark.py arguments]; ARCHS / SIZE_ARGS / LIMIT (seconds) override per phase
    local name=$1; shift
    local -a archs=() limit=() sz=("${size_args[@]}")
    for a in ${ARCHS:-teacher 2F all-L all-W}; do archs+=(--arch "$a"); done
    [[ -n ${LIMIT:-} ]] && limit=(timeout "$LIMIT")
    [[ -n ${SIZE_ARGS:-} ]] && read -r -a sz <<< "$SIZE_ARGS"
    echo "== models $name: ${sz[*]} $*"
    "${limit[@]}" "$py" tools/benchmark.py models --device "$device" --model dinov3_vitb16 "${archs[@]}" "${sz[@]}" \
        --warmup "$warmup" --repeat "$repeat" --throughput "${TP:-$throughput}" --json "$out/models_$name.json" "$@" \
        || echo "== models $name FAILED (rc $?)"
}
mixers() {  # mixers NAME [extra benchmark.py arguments]
    local name=$1; shift
    echo "== mixers $name: $*"
    "$py" tools/benchmark.py mixers --device "$device" --warmup "$warmup" --repeat "$repeat" \
        --grid ${MIXER_GRID:-64 128} --json "$out/mixers_$name.json" "$@" || echo "== mixers $name FAILED (rc $?)"
}
graph=(); [[ $device == cuda ]] && graph=(--cuda-graph)
read -r -a fast_size <<< "${FAST_SIZE:-1024 2048}"
read -r -a fast_depth_size <<< "${FAST_DEPTH_SIZE:-1036 2044}"
fast_kernels=()
for k in ${FAST_KERNELS:-auto triton flex compile}; do
    [[ $device != cuda && $k =~ ^(triton|flex)$ ]] || fast_kernels+=(--kernel "$k")  # the CPU: no Triton, slow flex
done
torch_paths=(--linear-cfg kernel=torch --window-kernel torch)
{
    # issue 20: the fast mixers ('auto' = Triton L, FlexAttention W on CUDA), bf16, batch 1
    mixers fast_bf16_graph --dtype bf16 "${graph[@]}" "${fast_kernels[@]}"
    SIZE_ARGS="--size ${fast_size[*]}" models fast_bf16_graph --dtype bf16 "${graph[@]}" --no-memory
    ARCHS="teacher 2F all-L" SIZE_ARGS="--size ${fast_size[*]}" LIMIT=${COMPILE_LIMIT:-240} TP=1 \
        models fast_bf16_compile --dtype bf16 --compile --no-memory
    ARCHS="teacher 2F all-L" SIZE_ARGS="--size ${fast_size[*]}" \
        models fast_l_bf16_graph --model dinov3_vitl16 --dtype bf16 "${graph[@]}" --no-memory
    ARCHS="teacher 2F" SIZE_ARGS="--size ${fast_depth_size[*]}" \
        models fast_depth_l_bf16_graph --model dinov2_vitl14 --head dpt --dtype bf16 "${graph[@]}" --no-memory
    # issue 10's reference set, on the torch paths
    # CUDA-graph replays first (the GPU's own time: no host launch overhead), L layers in 'mixed' and 'fp32'
    # precision; then eager (what a plain PyTorch user gets); then torch.compile (inductor fuses the elementwise
    # work) at 1024x2048 only, batch 1, teacher vs 2F: compiling takes minutes, hence the time limit
    models bf16_mixed_graph --dtype bf16 --linear-cfg precision=mixed "${torch_paths[@]}" "${graph[@]}"
    models fp32_graph --dtype fp32 "${torch_paths[@]}" "${graph[@]}"
    models bf16_graph --dtype bf16 "${torch_paths[@]}" "${graph[@]}" --no-memory
    mixers bf16_graph --dtype bf16 "${graph[@]}"
    models bf16_mixed --dtype bf16 --linear-cfg precision=mixed "${torch_paths[@]}" --no-memory
    # the depth model of the paper's Table 4: DepthAnythingV2-L (DINOv2-L + DPT head) vs its hybrids
    ARCHS="teacher 2F all-L" SIZE_ARGS="$depth_size_args" models depth_l_bf16_mixed_graph --model dinov2_vitl14 \
        --head dpt --dtype bf16 --linear-cfg precision=mixed "${torch_paths[@]}" "${graph[@]}"
    ARCHS="teacher 2F" SIZE_ARGS="--size ${COMPILE_SIZE:-1024 2048}" LIMIT=${COMPILE_LIMIT:-240} TP=1 \
        models bf16_mixed_compile --dtype bf16 --linear-cfg precision=mixed "${torch_paths[@]}" --compile --no-memory
} 2>&1 | tee "$out/run.log"
