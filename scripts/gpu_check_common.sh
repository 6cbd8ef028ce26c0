# What the device checks share (sourced by scripts/gpu_check.sh and scripts/gpu_check_paper.sh, after they set
# CHECK_NAME): the arguments, the image's python3, the repository on PYTHONPATH, the work dir and `phase`.
#
# $OUT gets three files, whatever the phases write (the device tool brings back at most 8): run.log (every phase's
# output, exit code and seconds), summary.json (tools/gpu_check.py summary: each phase's outcome, each kernel case and
# the paths that ran by the self-check verdicts, the baselines) and $CHECK_NAME.tgz (every file the phases wrote, in a
# work dir outside $OUT, and run.log), each rewritten after every phase, so a timeout keeps what ran.
# `--plan` instead of OUT prints each phase, its budget and what it proves, and the sum, and runs nothing.
usage="usage: bash scripts/$CHECK_NAME.sh OUT | --plan"
py=${PYTHON:-python3}
dry=${DRY_RUN:-0}
plan=0
[[ ${1:?$usage} == --plan ]] && plan=1
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
failed=0 planned=0
if [[ $plan == 1 ]]; then
    out=/nonexistent work=/nonexistent
    printf '%-12s %7s  %s\n' phase budget 'what it proves'
else
    mkdir -p "$1"
    out=$(cd "$1" && pwd)
    work=$(mktemp -d "${TMPDIR:-/tmp}/$CHECK_NAME.XXXXXX")
    mkdir -p "$work/files"
    log="$out/run.log"
    : > "$log"
    : > "$work/phases.tsv"
fi

phase() {  # phase NAME BUDGET WHAT COMMAND...: run it under its budget (x $scale), log it, pack and summarise
    local name=$1 budget=$2 what=$3 start rc seconds
    shift 3
    if [[ $plan == 1 ]]; then
        planned=$(( planned + budget ))
        printf '%-12s %6ss  %s\n' "$name" "$budget" "$what"
        return
    fi
    budget=$(( budget * scale ))
    start=$(date +%s)
    echo "== phase $name (budget ${budget} s): $*" >> "$log"
    timeout "$budget" "$@" >> "$log" 2>&1
    rc=$?
    seconds=$(( $(date +%s) - start ))
    echo "== phase $name: rc $rc, $seconds s$([[ $rc == 124 ]] && echo ' (TIMED OUT)')" >> "$log"
    printf '%s\t%s\t%s\t%s\n' "$name" "$budget" "$seconds" "$rc" >> "$work/phases.tsv"
    [[ $rc == 0 ]] || failed=1
    "$py" tools/gpu_check.py summary "$work" --json "$out/summary.json" >> "$log" 2>&1
    cp "$log" "$work/run.log"
    tar -czf "$out/.$CHECK_NAME.tgz.tmp" -C "$work" files run.log && mv "$out/.$CHECK_NAME.tgz.tmp" "$out/$CHECK_NAME.tgz"
    tail -n 1 "$log"
}

finish() {  # the last line, the work dir removed (its files are in the tarball), the exit code
    if [[ $plan == 1 ]]; then
        printf '%-12s %6ss  (the limit: 420 s, the device tool\x27s start aside)\n' total "$planned"
        exit 0
    fi
    echo "== done: $([[ $failed == 0 ]] && echo 'every phase passed' || echo 'a phase FAILED (see above)')" >> "$log"
    rm -rf "$work"
    tail -n 1 "$log"
    exit "$failed"
}
