# What the device checks share (sourced by scripts/gpu_check.sh and scripts/gpu_check_paper.sh, after they set
# CHECK_NAME): OUT's folders and run.log, the image's python3, the repository on PYTHONPATH, and `phase`.
out=${1:?usage: bash scripts/$CHECK_NAME.sh OUT}
py=${PYTHON:-python3}
dry=${DRY_RUN:-0}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out/files"
out=$(cd "$out" && pwd)
log="$out/run.log"
: > "$log"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
failed=0

phase() {  # phase NAME BUDGET COMMAND...: run it under its budget (x $scale), log it, pack what exists
    local name=$1 budget=$(( $2 * scale )) start rc
    shift 2
    start=$(date +%s)
    echo "== phase $name (budget ${budget} s): $*" >> "$log"
    timeout "$budget" "$@" >> "$log" 2>&1
    rc=$?
    echo "== phase $name: rc $rc, $(( $(date +%s) - start )) s$([[ $rc == 124 ]] && echo ' (TIMED OUT)')" >> "$log"
    [[ $rc == 0 ]] || failed=1
    tar -czf "$out/$CHECK_NAME.tgz.tmp" -C "$out" files run.log && mv "$out/$CHECK_NAME.tgz.tmp" "$out/$CHECK_NAME.tgz"
    tail -n 1 "$log"
}
