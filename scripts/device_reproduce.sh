#!/usr/bin/env bash
# A cell of the Dangle paper at its own budget, on a GPU, in resumable chunks (issue 33; issue 53: one seed a
# call, a config switch): --config transformer (the default: configs/cogs/transformer.yaml with relative
# positions, M = 16), dangle (configs/cogs/dangle.yaml) or rdangle-sep-o4 (configs/cogs/rdangle-sep.yaml,
# interval 4); 45,000 updates of 4,096 tokens, seed 1, train.device=cuda train.bf16=true; then exact match on
# `gen` and `test`.
#
#   scripts/device_reproduce.sh OUT_DIR [RUN_DIR] [--config NAME] [--cpu-smoke] [--budget-s S]
#
# One call trains for at most --budget-s seconds of wall clock (default 530: a device command may run 10
# minutes), in chunks ended by `timeout --signal=TERM` (structseq finishes the update, saves checkpoints/last.pt
# and exits; `structseq train --resume` continues bit-exactly). The run directory travels in OUT_DIR packed as
# run.tar.gz.part-NN (15 MiB each, under the 16 MiB a returned file may hold; best.pt left out: the paper
# evaluates the last checkpoint): keep them under results/gpu/runs/CONFIG-seed1/ and give that folder (carried,
# or a plain run directory) as RUN_DIR to the next call to continue (the run's config comes with it). When the
# budget is reached it evaluates `gen` and `test` (`structseq evaluate RUN --split S --json`), in this call if
# time is left, else in the next one. OUT_DIR gets: device.json (first), progress.json (after every chunk:
# updates done, wall seconds, updates per minute, an estimate of the minutes left, each chunk, the evaluations),
# reproduce.log, the parts. A chunk that ends before its first checkpoint makes the next one twice as long.
# --cpu-smoke: the same on the CPU in seconds (a tiny model on generated files, 120 updates, chunks of 8 s,
# budget 60 s); it says its numbers are not measurements, and exits 1 unless it trained to the end and evaluated.
# --k-runs K (issue 45): seeds 1..K at once through `structseq train-many` (one process each, pinned to its own
# cores, on the one GPU), with the fast path (optim.num_buckets=16, optim.static_shapes=true: train.compile auto
# compiles; --plain leaves it out); each run's gen and test are evaluated (labels seedN/gen); progress.json
# counts the slowest run's updates and the runs' aggregate updates a minute. The parts are left out once every
# evaluation is done (progress.json holds the results). The lease plan runs one seed a call (K runs' parts do not
# come back: about 45 MiB a run) and measures K runs in a call of its own (scripts/device_kscale.sh).
# Environment: PYTHON (default python3), STRUCTSEQ_DATA (the data root holding cogs/, or a folder of *.tar.gz of
# it), CHUNK_S (longest chunk).
set -uo pipefail
NAME=device_reproduce
OUT_DIR="" RUN_IN="" SMOKE="" BUDGET_S="" K="" PLAIN="" WHICH=transformer
while [ $# -gt 0 ]; do
    case "$1" in
        --cpu-smoke) SMOKE=1 ;;
        --k-runs) K=$2; shift ;;
        --plain) PLAIN=1 ;;
        --config) WHICH=$2; shift ;;
        --budget-s) BUDGET_S=$2; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
        *) if [ -z "$OUT_DIR" ]; then OUT_DIR=$1; else RUN_IN=$1; fi ;;
    esac
    shift
done
[ -n "$OUT_DIR" ] || { echo "usage: scripts/device_reproduce.sh OUT_DIR [RUN_DIR] [--config transformer|dangle|rdangle-sep-o4] [--cpu-smoke] [--budget-s S] [--k-runs K [--plain]]" >&2; exit 2; }
case "$WHICH" in  # the config and what the shipped file leaves to the command line
    transformer) CONFIG=configs/cogs/transformer.yaml MODEL_SETS=(--set model.positions=relative --set model.max_relative=16) ;;
    dangle) CONFIG=configs/cogs/dangle.yaml MODEL_SETS=() ;;
    rdangle-sep-o4) CONFIG=configs/cogs/rdangle-sep.yaml MODEL_SETS=(--set model.interval=4) ;;
    *) echo "device_reproduce: --config $WHICH: choose transformer, dangle or rdangle-sep-o4" >&2; exit 2 ;;
esac
source "$(dirname "${BASH_SOURCE[0]}")/device_common.sh"
mkdir -p "$OUT_DIR" && OUT_DIR="$(cd "$OUT_DIR" && pwd)"
[ -z "$RUN_IN" ] || RUN_IN="$(cd "$RUN_IN" && pwd)" || exit 2
exec > >(tee -a "$OUT_DIR/reproduce.log") 2>&1
TEE=$!
cd "$ROOT"
WORK="$(mktemp -d)"  # the live run: $WORK/run, with $WORK/progress.json (packed into OUT_DIR after each chunk)
trap 'rm -rf "$WORK"' EXIT
RUN="$WORK/run"

SETS=("${MODEL_SETS[@]}" --set train.device=cuda --set train.bf16=true
      --set train.save_every=1000)  # a hard kill loses at most 1,000 updates (checkpoints change no number)
EVAL=(gen=gen test=test)  # label=split
MIN_CHUNK_S=60 EVAL_MIN_S=150 KILL_AFTER=60 MARGIN=10
if [ -n "$SMOKE" ]; then
    DATA="${TMPDIR:-/tmp}/structseq-reproduce-smoke-data"  # fixed: a resumed run reads its data from here again
    mkdir -p "$DATA"
    "$PY" - "$DATA" <<'EOF'  # a copy task with COGS's columns (source, target, category)
import random, sys
for split, n in (("train", 300), ("dev", 20), ("gen", 20), ("test", 20)):
    r = random.Random(split)
    rows = [[r.choice("abcdefgh") for _ in range(r.randint(2, 7))] for _ in range(n)]
    open(f"{sys.argv[1]}/{split}.tsv", "w").write("".join(f"{' '.join(x)}\t{' '.join(x).upper()}\tcopy\n" for x in rows))
EOF
    SETS=("${MODEL_SETS[@]}" --set train.device=cpu --set train.bf16=false
          --set data.dataset=files --set "data.train=$DATA/train.tsv" --set "data.valid=$DATA/dev.tsv"
          --set "data.test=[$DATA/gen.tsv, $DATA/test.tsv]" --set "data.columns=[source, target, category]"
          --set model.d_model=16 --set model.n_heads=2 --set model.ffn_dim=32 --set optim.max_tokens=128
          --set optim.lr=1e-3 --set optim.warmup=20 --set train.max_steps=120 --set train.valid_every=60
          --set train.log_every=20 --set train.threads=1 --set decode.max_len_b=12)
    EVAL=("gen=$DATA/gen.tsv" "test=$DATA/test.tsv")
    BUDGET_S=${BUDGET_S:-60} CHUNK_S=${CHUNK_S:-8} MIN_CHUNK_S=4 EVAL_MIN_S=5 KILL_AFTER=15 MARGIN=2
fi
BUDGET_S=${BUDGET_S:-530} CHUNK_S=${CHUNK_S:-530}
if [ -n "$K" ]; then  # K seeds at once: RUN holds one run directory per seed (train-many names them)
    [ -n "$PLAIN" ] || SETS+=(--set optim.num_buckets=16 --set optim.static_shapes=true)
    SEEDS=$(seq -s, 1 "$K")  # each evaluation waits for EVAL_MIN_S on its own: the wait is not K times longer
fi

# progress RUN_DIR PROGRESS_JSON [CHUNK_JSON | eval LABEL FILE | evaluated LABEL | save]: print "STEP MAX_STEPS
# FINISHED" of the run's last checkpoint; with a chunk's record, add it (updates, wall seconds, updates per minute) to
# PROGRESS_JSON; "eval LABEL FILE": record the metrics `structseq evaluate --json` wrote to FILE and print its exact
# match; "evaluated LABEL": exit 0 when LABEL has metrics already (nothing printed); "save": only write the state
progress() {
    "$PY" - "$@" <<'EOF'
import json, sys, time
from pathlib import Path

run, path = Path(sys.argv[1]), Path(sys.argv[2])
state = json.loads(path.read_text()) if path.exists() else {"chunks": [], "eval": {}}
ckpts = [c for c in [run / "checkpoints" / "last.pt", *sorted(run.glob("*/checkpoints/last.pt"))] if c.exists()]
mode = sys.argv[3] if len(sys.argv) > 3 else None
if mode == "evaluated":
    sys.exit(0 if "exact_match" in state["eval"].get(sys.argv[4], {}) else 1)
if mode == "evaluated-all":  # every run's every split has its metrics
    done = sum("exact_match" in v for v in state["eval"].values())
    print("yes" if done >= int(sys.argv[4]) * int(sys.argv[5]) else "no")
    sys.exit(0)
step, max_steps, stopped = state.get("steps", 0), state.get("max_steps"), state.get("stopped")
before = dict(state.get("run_steps", {}))
if ckpts and mode != "eval":  # an evaluation changes no checkpoint: no torch to import
    import torch
    runs = {}
    for ckpt in ckpts:  # one run, or several (--k-runs): the slowest one's progress
        c = torch.load(ckpt, map_location="cpu", weights_only=True)
        runs[ckpt.parent.parent.name] = (c["progress"]["step"], c["progress"].get("stopped"))
        state.update(config=c["config"], train_seconds=c["progress"].get("train_seconds"))
        max_steps = c["config"]["train"]["max_steps"]
    step = min(s for s, _ in runs.values())
    stopped = "early_stopping" if all(s == "early_stopping" for _, s in runs.values()) else runs[min(runs)][1]
    state["run_steps"] = {name: s for name, (s, _) in runs.items()}
if mode == "eval":
    label, out = sys.argv[4], Path(sys.argv[5])
    lines = out.read_text().strip().splitlines() if out.exists() else []
    try:
        state["eval"][label] = json.loads(lines[-1])
    except (IndexError, ValueError):
        state["eval"][label] = {"error": "no JSON from structseq evaluate", "output": lines[-5:]}
    print(label, "exact match", state["eval"][label].get("exact_match", state["eval"][label]), file=sys.stderr)
elif mode not in (None, "save"):
    chunk = json.loads(mode)
    done_now = sum(s - before.get(name, chunk["steps_before"]) for name, s in state.get("run_steps", {}).items()) or step - chunk["steps_before"]
    chunk.update(steps_after=step, updates=done_now, updates_per_min=round(done_now / chunk["wall_s"] * 60, 2),
                 runs=len(state.get("run_steps", {})) or 1)
    state["chunks"].append(chunk)
done = sum(c["updates"] for c in state["chunks"])
wall = sum(c["wall_s"] for c in state["chunks"])
rate = state["chunks"][-1]["updates_per_min"] / state["chunks"][-1].get("runs", 1) if state["chunks"] else None
state.update(updated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), steps=step, max_steps=max_steps,
             stopped=stopped, finished=bool(max_steps and step >= max_steps) or stopped == "early_stopping",
             wall_s=round(wall, 1), updates_per_min=round(done / wall * 60, 2) if wall else None,
             minutes_left=round((max_steps - step) / rate, 1) if rate and max_steps else None)
if mode:
    path.write_text(json.dumps(state, indent=1) + "\n")
print(step, max_steps or 0, int(state["finished"]))
EOF
}

pack() {  # the run (without best.pt) and the progress into OUT_DIR/run.tar.gz.part-NN, under 16 MiB each
    cp "$WORK/progress.json" "$OUT_DIR/progress.json"
    rm -f "$OUT_DIR"/run.tar.gz.part-*
    tar -C "$WORK" --exclude='checkpoints/best.pt' -czf - $([ -d "$RUN" ] && echo run) progress.json |
        split -b 15M -d -a 2 - "$OUT_DIR/run.tar.gz.part-"
    say "packed: $(du -ch "$OUT_DIR"/run.tar.gz.part-* | tail -1 | cut -f1) in $(ls "$OUT_DIR"/run.tar.gz.part-* | wc -l) part(s)"
}

say "results in $OUT_DIR; $WHICH ($CONFIG); budget ${BUDGET_S}s; $ROOT at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no git)')"
write_device_json "$OUT_DIR/device.json"
DEVICE_NAME=$("$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['device_name'])" "$OUT_DIR/device.json" 2>/dev/null)
ensure_structseq
unpack_data
if [ -n "$RUN_IN" ]; then
    if compgen -G "$RUN_IN/run.tar.gz.part-*" >/dev/null; then
        say "continuing the run packed in $RUN_IN"
        cat "$RUN_IN"/run.tar.gz.part-* | tar -C "$WORK" -xzf - || { say "cannot unpack $RUN_IN"; exit 2; }
    elif [ -f "$RUN_IN/checkpoints/last.pt" ] || compgen -G "$RUN_IN/*/checkpoints/last.pt" >/dev/null; then
        say "continuing the run directory $RUN_IN"
        cp -a "$RUN_IN" "$RUN"
    else
        say "$RUN_IN holds neither run.tar.gz.part-* nor checkpoints/last.pt"; exit 2
    fi
elif [ -z "$SMOKE" ]; then
    root=$("$PY" -c "from structseq.paths import data_root; print(data_root())")
    [ -f "$root/cogs/train.tsv" ] || {
        say "no COGS data at $root/cogs: set STRUCTSEQ_DATA to a folder holding cogs/{train,dev,test,gen}.tsv"; exit 2; }
fi

read -r STEP MAX FINISHED < <(progress "$RUN" "$WORK/progress.json" save)
: "${STEP:=0}" "${MAX:=0}" "${FINISHED:=0}"
stalled=0
while [ "$FINISHED" != 1 ] && [ $(($(left) - KILL_AFTER - MARGIN)) -ge $MIN_CHUNK_S ]; do
    limit=$(($(left) - KILL_AFTER - MARGIN))
    [ "$limit" -gt "$CHUNK_S" ] && limit=$CHUNK_S
    if [ -n "$K" ]; then  # new runs and resumed ones alike: train-many continues what it finds
        cmd=("$PY" -m structseq train-many "$CONFIG" --out "$RUN" --seeds "$SEEDS" "${SETS[@]}")
    elif [ -f "$RUN/checkpoints/last.pt" ]; then
        cmd=("$PY" -m structseq train --resume "$RUN")
    else
        cmd=("$PY" -m structseq train "$CONFIG" --out "$RUN" --seed 1 "${SETS[@]}")
    fi
    say "== chunk from update $STEP of $MAX: at most ${limit}s: ${cmd[*]}"
    started=$(date -u +%Y-%m-%dT%H:%M:%SZ) t=$SECONDS
    timeout --signal=TERM --kill-after=$KILL_AFTER "$limit" "${cmd[@]}"
    rc=$?
    chunk=$(printf '{"started": "%s", "wall_s": %d, "exit": %d, "steps_before": %d, "device": "%s", "limit_s": %d}' \
        "$started" $((SECONDS - t)) "$rc" "$STEP" "$DEVICE_NAME" "$limit")
    before=$STEP
    read -r STEP MAX FINISHED < <(progress "$RUN" "$WORK/progress.json" "$chunk")
    : "${STEP:=0}" "${MAX:=0}" "${FINISHED:=0}"
    say "chunk ended (exit $rc; 124: stopped at its time limit): update $STEP of $MAX"
    pack
    if [ "$STEP" -le "$before" ]; then  # stopped before its first checkpoint (start-up longer than the chunk?)
        stalled=$((stalled + 1)) CHUNK_S=$((CHUNK_S * 2))
        [ $stalled -ge 3 ] && { say "three chunks without progress: stopping"; break; }
    fi
done

TARGETS=("$RUN=")  # run directory=label prefix
if [ -n "$K" ]; then
    TARGETS=()
    for seed in $(seq 1 "$K"); do TARGETS+=("$RUN/$(basename "$CONFIG" .yaml)-seed$seed=seed$seed/"); done
fi
if [ "$FINISHED" = 1 ]; then
    for target in "${TARGETS[@]}"; do
    for pair in "${EVAL[@]}"; do
        dir=${target%%=*} label=${target#*=}${pair%%=*} split=${pair#*=}
        if progress "$RUN" "$WORK/progress.json" evaluated "$label"; then
            say "$label: evaluated already"; continue
        fi
        limit=$(($(left) - MARGIN))
        if [ "$limit" -lt $EVAL_MIN_S ]; then
            say "$label: ${limit}s left, under ${EVAL_MIN_S}s: evaluated by the next call (RUN_DIR $OUT_DIR)"; continue
        fi
        say "== evaluate $label (at most ${limit}s)"
        timeout -k 5 "$limit" "$PY" -m structseq evaluate "$dir" --split "$split" --json >"$WORK/eval.out"
        progress "$RUN" "$WORK/progress.json" eval "$label" "$WORK/eval.out" >/dev/null
        pack
    done
    done
    if [ -n "$K" ] && [ "$(progress "$RUN" "$WORK/progress.json" evaluated-all "${#TARGETS[@]}" "${#EVAL[@]}")" = yes ]; then
        rm -f "$OUT_DIR"/run.tar.gz.part-*  # every result is in progress.json: the runs need not come back
        say "every run evaluated: the parts are left out"
    fi
else
    say "not finished: update $STEP of $MAX; continue with: scripts/device_reproduce.sh NEW_OUT $OUT_DIR"
fi
[ -f "$OUT_DIR/progress.json" ] || pack  # nothing ran in this call: what came in goes back out
rc=0
check_returned || rc=1
if [ -n "$SMOKE" ]; then  # the smoke's end: every update trained and every split evaluated
    evaluated=$("$PY" -c "import json, sys; s = json.load(open(sys.argv[1])); print(sum('exact_match' in v for v in s['eval'].values()))" "$OUT_DIR/progress.json" 2>/dev/null || echo 0)
    if [ "$FINISHED" != 1 ] || [ "$evaluated" -lt $((${#TARGETS[@]} * ${#EVAL[@]})) ]; then
        say "--cpu-smoke did not reach its end (update $STEP of $MAX, $evaluated evaluations): exit 1"; rc=1
    fi
fi
say "done in $((SECONDS - T0))s: update $STEP of $MAX; $OUT_DIR/progress.json; exit $rc"
exec >&- 2>&-
wait "$TEE"
exit $rc
