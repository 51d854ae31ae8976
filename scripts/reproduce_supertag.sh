#!/usr/bin/env bash
# Issue 10 records: train and evaluate supertaggers on TLGbank light, one run at a time.
#   scripts/reproduce_supertag.sh [CONFIG:SEED ...]      (default: every CPU config x seeds 1 2 3)
# CONFIG names configs/tlgbank-light/CONFIG-cpu.yaml; each run goes to $OUT/CONFIG-sSEED (default runs/supertag)
# and gets eval-test-beam1.json (greedy) and eval-test-beam5.json (k-best: oracle, beta curve).
# Tabulate with: python scripts/supertag_table.py runs/supertag
set -euo pipefail
OUT=${OUT:-runs/supertag}
BIN=${BIN:-.venv/bin/structseq}
JOBS=("$@")
if [ ${#JOBS[@]} -eq 0 ]; then
  for s in 1 2 3; do for c in classifier tree tree-nosf tree-nonf tree-nosf-nonf; do JOBS+=("$c:$s"); done; done
fi
for job in "${JOBS[@]}"; do
  c=${job%%:*}; s=${job##*:}; run=$OUT/$c-s$s
  if [ ! -f "$run/checkpoints/last.pt" ]; then
    mkdir -p "$OUT"
    $BIN train "configs/tlgbank-light/$c-cpu.yaml" -o "$run" --seed "$s" --quiet > "$run.log" 2>&1
  fi
  [ -f "$run/eval-test-beam1.json" ] || $BIN evaluate "$run" --beam 1 --json > "$run/eval-test-beam1.json"
  [ -f "$run/eval-test-beam5.json" ] || $BIN evaluate "$run" --beam 5 --json > "$run/eval-test-beam5.json"
done
