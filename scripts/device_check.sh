#!/usr/bin/env bash
# One command for a bare GPU machine without network (issue 33): under 8 minutes on one H100.
#
#   scripts/device_check.sh OUT_DIR [--cpu-smoke]
#
# 1. OUT_DIR/device.json first (nvidia-smi, torch/CUDA versions, date): results name the device even if stopped;
# 2. structseq from this working tree over the machine's own PyTorch (pip install -e without dependencies or
#    index; else PYTHONPATH), then OUT_DIR/imports.json: every third-party import pyproject.toml names, which
#    are missing and what needs them (the script goes on regardless);
# 3. pytest -m gpu (tests/test_gpu.py): OUT_DIR/gpu-tests.xml (junit, skips with their reasons);
# 4. benchmarks/bench_gpu.py: OUT_DIR/bench/{gemm,train,decode}.json, each rewritten after every measurement
#    (the models the A/B leaves out, when it runs);
# 5. the A/B (issue 45): benchmarks/bench_ab.py, d15a89c against this tree's fast path (length buckets, static
#    shapes, compiled step, TF32), alternating A B A B, into OUT_DIR/ab.tar.gz with its table in check.log. d15a89c's
#    src/, benchmarks/ and configs/ come from AB_BASE (default ROOT/.device-base, made before the call with
#    `git archive d15a89c src benchmarks configs | tar -x -C .device-base`), else from git here; AB_S=0: no A/B.
# Everything printed goes to OUT_DIR/check.log too: 8 files in all, what a device call brings back (at most 8).
# Each step has a time limit (timeout): TESTS_S (default 120), BENCH_S (90 with the A/B, else 210) and AB_S
# (default 240: per round 1/6 for d15a89c, 1/3 for the fast path, which compiles) seconds, the rest short: under 8
# minutes in all.
# --cpu-smoke: the same steps on the CPU in seconds (one gpu test, tiny benchmark models): what CI runs.
# Environment: PYTHON (default python3), STRUCTSEQ_DATA (benchmark data; missing datasets are replaced by
# generated ones in the benchmark), GPU_TESTS (pytest selection, default: all of tests/test_gpu.py).
# Exit status: 0 when every step succeeded, else 1 (each step's status is in check.log's last lines).
set -uo pipefail
NAME=device_check
OUT_DIR="" SMOKE=""
for arg in "$@"; do
    case "$arg" in
        --cpu-smoke) SMOKE=1 ;;
        -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
        *) OUT_DIR="$arg" ;;
    esac
done
[ -n "$OUT_DIR" ] || { echo "usage: scripts/device_check.sh OUT_DIR [--cpu-smoke]" >&2; exit 2; }
source "$(dirname "${BASH_SOURCE[0]}")/device_common.sh"
mkdir -p "$OUT_DIR/bench" && OUT_DIR="$(cd "$OUT_DIR" && pwd)"
exec > >(tee -a "$OUT_DIR/check.log") 2>&1
TEE=$!
cd "$ROOT"

AB_S=${AB_S:-240} AB_BASE=${AB_BASE:-$ROOT/.device-base}
if [ "$AB_S" != 0 ] && [ ! -f "$AB_BASE/benchmarks/bench_gpu.py" ]; then  # no folder carried: git, if here
    AB_BASE="$(mktemp -d)"
    git -C "$ROOT" archive d15a89c src benchmarks configs 2>/dev/null | tar -x -C "$AB_BASE" 2>/dev/null
fi
[ -f "$AB_BASE/benchmarks/bench_gpu.py" ] || AB_S=0
AB_MODELS=(cogs/transformer cogs/dangle)  # the two goals; R-Dangle's intervals: bench_ab.py in a call of its own
TESTS_S=${TESTS_S:-120} BENCH_S=${BENCH_S:-$([ "$AB_S" = 0 ] && echo 210 || echo 90)}
DEVICE=cuda
SELECT=("$ROOT/tests/test_gpu.py")
[ -n "${GPU_TESTS:-}" ] && read -r -a SELECT <<<"$GPU_TESTS"
BENCH_ARGS=(--budget-s $((BENCH_S - 40)))
[ "$AB_S" = 0 ] || BENCH_ARGS+=(--only transformer-6+6 lstm supertag interleave oinf)
AB_ARGS=(--rounds 2 --run-s $(((AB_S - 10) / 6)) --run-s-b $(((AB_S - 10) / 3)) --only "${AB_MODELS[@]}")
if [ -n "$SMOKE" ]; then
    DEVICE=cpu TESTS_S=${TESTS_S_SMOKE:-400} BENCH_S=${BENCH_S_SMOKE:-400}  # caps, far above an idle machine
    SELECT=("$ROOT/tests/test_gpu.py::test_every_architecture_trains_and_its_loss_falls[lstm-fp32]")
    BENCH_ARGS=(--cpu-smoke)
    [ "$AB_S" = 0 ] || AB_S=400 AB_ARGS=(--cpu-smoke --rounds 1 --run-s 200 --only cogs/transformer)
fi
declare -a STATUS=()
step() {  # step NAME LIMIT_S COMMAND...: run it time-limited, say where we are and how it went
    local name=$1 limit=$2 start=$SECONDS rc
    shift 2
    say "== $name (limit ${limit}s)"
    timeout -k 10 "$limit" "$@"
    rc=$?
    local how=ok
    [ $rc -eq 0 ] || how="FAILED (exit $rc)"
    [ $rc -eq 124 ] && how="FAILED (time limit)"
    STATUS+=("$name: $how in $((SECONDS - start))s")
    say "${STATUS[-1]}"
}

say "results in $OUT_DIR; device $DEVICE; $ROOT at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no git)')"
write_device_json "$OUT_DIR/device.json"
ensure_structseq
step imports 60 "$PY" - "$ROOT" "$OUT_DIR/imports.json" <<'EOF'
"""Every third-party import pyproject.toml names (dependencies and extras): there or missing, and what needs it."""
import importlib, importlib.metadata, importlib.util, json, re, sys
from pathlib import Path

root, out = Path(sys.argv[1]), Path(sys.argv[2])
text = (root / "pyproject.toml").read_text()
try:
    import tomllib
    project = tomllib.loads(text)["project"]
    groups = {"dependencies": project["dependencies"], **{f"extra {k}": v for k, v in
                                                         project.get("optional-dependencies", {}).items()}}
except ImportError:  # Python 3.10: the dependency list read by hand
    groups = {"dependencies": re.findall(r'^\s*"([^"]+)"', text.split("dependencies = [", 1)[1].split("]", 1)[0], re.M)}
MODULES = {"pyyaml": "yaml", "pytest-timeout": "pytest_timeout"}
NEEDED_BY = {"textblob": "`structseq compose stats` (English POS tags) only", "nltk": "textblob only",
             "transformers": "model.encoder.pretrained (supertaggers on a local pretrained encoder) only",
             "hypothesis": "property tests (not the gpu tests)", "pytest-timeout": "per-test limits (optional)",
             "tokenizers": "BPE subwords (context-aware MT configs)", "matplotlib": "plots (lexicon, compose)"}
rows, missing = [], []
for group, reqs in groups.items():
    for req in reqs:
        dist = re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower()
        module = MODULES.get(dist, dist.replace("-", "_"))
        row = {"distribution": dist, "module": module, "group": group, "needed_by": NEEDED_BY.get(dist, "the package")}
        try:  # found, not imported (transformers alone takes seconds): structseq's own imports below are real
            if importlib.util.find_spec(module) is None:
                raise ModuleNotFoundError(f"no module named {module!r}")
            row["version"] = importlib.metadata.version(dist)
        except Exception as e:
            row["missing"] = f"{type(e).__name__}: {e}"
            missing.append(f"{dist} ({group}; needed by {row['needed_by']})")
        rows.append(row)
for module in ("structseq", "structseq.api", "structseq.cli"):
    try:
        m = importlib.import_module(module)
        rows.append({"module": module, "file": getattr(m, "__file__", None)})
    except Exception as e:
        rows.append({"module": module, "missing": f"{type(e).__name__}: {e}"})
        missing.append(f"{module} does not import: {type(e).__name__}: {e}")
out.write_text(json.dumps({"python": sys.executable, "imports": rows, "missing": missing}, indent=1) + "\n")
for row in rows:
    print(f"  {row['module']:16s} {row.get('version') or row.get('file') or 'MISSING: ' + row['missing']}")
print("missing: " + ("; ".join(missing) if missing else "nothing"))
core = [m for m in missing if m.split(" ")[0] in ("torch", "numpy", "pyyaml", "typer", "rich", "sacrebleu") or
        m.startswith("structseq")]
sys.exit(1 if core else 0)
EOF

TIMEOUT_FLAG=()
"$PY" -c "import pytest_timeout" 2>/dev/null && TIMEOUT_FLAG=(--timeout 120)
export STRUCTSEQ_TEST_DEVICE=$DEVICE
step "gpu tests" "$TESTS_S" "$PY" -m pytest "${SELECT[@]}" -m gpu -p no:cacheprovider \
    -vv -rsfE --durations=15 -o junit_family=xunit1 --junitxml "$OUT_DIR/gpu-tests.xml" "${TIMEOUT_FLAG[@]}"
step benchmark "$BENCH_S" "$PY" "$ROOT/benchmarks/bench_gpu.py" --out "$OUT_DIR/bench" "${BENCH_ARGS[@]}"
if [ "$AB_S" = 0 ]; then
    say "no A/B: no d15a89c sources (carry .device-base, see the header) or AB_S=0"
else
    step "A/B d15a89c vs fast path" "$AB_S" "$PY" "$ROOT/benchmarks/bench_ab.py" --base "$AB_BASE" \
        --out "$OUT_DIR/ab.tar.gz" "${AB_ARGS[@]}"
fi

say "== summary ($((SECONDS - T0))s in all; results in $OUT_DIR)"
printf '  %s\n' "${STATUS[@]}"
[[ "${STATUS[*]}" != *FAILED* ]]
rc=$?
exec >&- 2>&-
wait "$TEE"  # check.log complete before we return
exit $rc
