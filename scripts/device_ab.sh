#!/usr/bin/env bash
# One call of the lease plan (scripts/lease_plan.py, calls `ab-*`): the A/B of issue 45's fast path on a GPU.
#
#   scripts/device_ab.sh OUT_DIR [--budget-s S] [--only MODEL...] [--rounds N] [--cpu-smoke]
#
# OUT_DIR/device.json first; then benchmarks/bench_ab.py: d15a89c (AB_BASE, default ROOT/.device-base, made
# before the call with `git archive d15a89c src benchmarks configs | tar -x -C .device-base`; else from git
# here) against this tree's fast path eager (TF32) and compiled, one model per process, every batch shape warmed
# up before timing, rounds alternating, into OUT_DIR/ab.tar.gz, its table (tokens/s beside s/update) at the end
# of OUT_DIR/ab.log. The compiled arm's rounds share one fresh inductor cache (TORCHINDUCTOR_CACHE_DIR): round
# 1's warm-up seconds are a cold cache's compile, round 2's a warm one's (per batch shape: divided by `shapes`).
# --budget-s S (default 270, the plan's): the whole call; the runs share S less 30 s. --only: the models
# (default cogs/transformer; cogs/dangle in a call of its own). --rounds N (default 2; 1 with --cpu-smoke, whose
# point is the plumbing: a loaded CPU starts a process slower than the GPU machine does). --cpu-smoke: tiny
# models on the CPU, not measurements (it says so). Exit 0 when every run ended and everything in OUT_DIR would
# come back, else 1.
set -uo pipefail
NAME=device_ab OUT_DIR="" SMOKE="" BUDGET_S=270 ROUNDS="" MODELS=()
source "$(dirname "${BASH_SOURCE[0]}")/device_common.sh"
parse_call_args "$@"
set -- "${REST[@]}"
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS=$2; shift ;;
        --only) while [ $# -gt 1 ] && [[ "$2" != --* ]]; do MODELS+=("$2"); shift; done ;;
        *) echo "device_ab: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ ${#MODELS[@]} -gt 0 ] || MODELS=(cogs/transformer)
[ -n "$ROUNDS" ] || ROUNDS=$([ -n "$SMOKE" ] && echo 1 || echo 2)  # the smoke: one round, each run twice the time
start_call ab.log
say "models ${MODELS[*]}, $ROUNDS round(s)"
AB_BASE=${AB_BASE:-$ROOT/.device-base}
if [ ! -f "$AB_BASE/benchmarks/bench_gpu.py" ]; then  # no folder carried: git, if here
    AB_BASE="$(mktemp -d)"
    git -C "$ROOT" archive d15a89c src benchmarks configs 2>/dev/null | tar -x -C "$AB_BASE" 2>/dev/null
fi
rc=0
if [ ! -f "$AB_BASE/benchmarks/bench_gpu.py" ]; then
    say "no d15a89c sources (carry .device-base, see the header): no A/B"
    rc=1
else
    TORCHINDUCTOR_CACHE_DIR="$(mktemp -d)"
    export TORCHINDUCTOR_CACHE_DIR
    ARGS=(--base "$AB_BASE" --out "$OUT_DIR/ab.tar.gz" --rounds "$ROUNDS" --only "${MODELS[@]}" --budget-s $((BUDGET_S - 30)))
    [ -z "$SMOKE" ] || ARGS+=(--cpu-smoke)
    timeout -k 10 $((BUDGET_S - 10)) "$PY" "$ROOT/benchmarks/bench_ab.py" "${ARGS[@]}" || rc=1
fi
finish_call $rc
