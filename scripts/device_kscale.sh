#!/usr/bin/env bash
# One call of the lease plan (scripts/lease_plan.py, call `kscale`): K training processes on the one GPU at once.
#
#   scripts/device_kscale.sh OUT_DIR [--budget-s S] [--cpu-smoke]
#
# OUT_DIR/device.json first; then benchmarks/bench_kscale.py (K = 1, 2, 4 copies of the COGS Transformer, each
# warmed up over every batch shape and timed over the same window) into OUT_DIR/kscale.json, everything printed
# into OUT_DIR/kscale.log. --budget-s S (default 150, the plan's): the whole call; the runs share S less 30 s.
# KSCALE_COMPILE (default off: a short call has no time for K processes' compiles) sets train.compile.
# --cpu-smoke: tiny models on the CPU (K = 1, 2), not measurements (it says so). Exit 0 when every K was timed
# and everything in OUT_DIR would come back, else 1.
set -uo pipefail
NAME=device_kscale OUT_DIR="" SMOKE="" BUDGET_S=150
source "$(dirname "${BASH_SOURCE[0]}")/device_common.sh"
parse_call_args "$@"
start_call kscale.log
ARGS=(--out "$OUT_DIR/kscale.json" --budget-s $((BUDGET_S - 30)) --compile "${KSCALE_COMPILE:-off}")
[ -z "$SMOKE" ] || ARGS+=(--cpu-smoke)
rc=0
timeout -k 10 $((BUDGET_S - 10)) "$PY" "$ROOT/benchmarks/bench_kscale.py" "${ARGS[@]}" || rc=1
finish_call $rc
