#!/usr/bin/env bash
# Issue 10 records: train and evaluate supertaggers on TLGbank light, one run at a time.
#   scripts/reproduce_supertag.sh [CONFIG:SEED ...]      (default: every CPU config x seeds 1 2 3)
# CONFIG names configs/tlgbank-light/CONFIG-cpu.yaml; each run goes to $OUT/CONFIG-sSEED (default runs/supertag)
# and gets eval-test-beam1.json (greedy) and eval-test-beam5.json (k-best: oracle, beta curve).
# Both evaluations are also kept as records in $RECORDS/CONFIG-sSEED-beamK.json (default results/supertag/evals).
# Tabulate with: structseq report supertag results/supertag/evals --plot docs/supertag-beta-curve.png
set -euo pipefail
OUT=${OUT:-runs/supertag}
RECORDS=${RECORDS:-results/supertag/evals}
BIN=${BIN:-.venv/bin/structseq}
JOBS=("$@")
if [ ${#JOBS[@]} -eq 0 ]; then
  for s in 1 2 3; do for c in classifier tree tree-nosf tree-nonf tree-nosf-nonf; do JOBS+=("$c:$s"); done; done
fi
for job in "${JOBS[@]}"; do
  c=${job%%:*}; s=${job##*:}; run=$OUT/$c-s$s
  mkdir -p "$OUT"
  if [ ! -f "$run/checkpoints/last.pt" ]; then
    $BIN train "configs/tlgbank-light/$c-cpu.yaml" -o "$run" --seed "$s" --quiet > "$run.log" 2>&1
  else  # interrupted: continue bit-exactly (a finished run is left unchanged)
    $BIN train --resume "$run" --quiet >> "$run.log" 2>&1
  fi
  [ -f "$run/eval-test-beam1.json" ] || $BIN evaluate "$run" --beam 1 --json > "$run/eval-test-beam1.json"
  [ -f "$run/eval-test-beam5.json" ] || $BIN evaluate "$run" --beam 5 --json > "$run/eval-test-beam5.json"
  mkdir -p "$RECORDS"
  for k in 1 5; do cp "$run/eval-test-beam$k.json" "$RECORDS/$c-s$s-beam$k.json"; done
done
