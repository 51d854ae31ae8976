#!/usr/bin/env bash
# One call of the lease plan (scripts/lease_plan.py, call `check`) on a bare GPU machine without network.
#
#   scripts/device_check.sh OUT_DIR [--budget-s S] [--cpu-smoke]
#
# 1. OUT_DIR/device.json first (nvidia-smi, torch/CUDA versions, date): results name the device even if stopped;
# 2. structseq from this working tree over the machine's own PyTorch (pip install -e without dependencies or
#    index; else PYTHONPATH), then OUT_DIR/imports.json: every third-party import pyproject.toml names (each
#    distribution once, under the module it imports: pytest-xdist is `xdist`, import-linter `importlinter`),
#    which are missing and what needs them (the script goes on regardless);
# 3. pytest -m gpu (tests/train/test_gpu.py): OUT_DIR/gpu-tests.xml (junit, skips with their reasons), stopped at its
#    limit with SIGINT (pytest then writes the junit file of what ran; SIGTERM would lose it);
# 4. benchmarks/bench_gpu.py: OUT_DIR/bench/{gemm,train,decode}.json, each rewritten after every measurement, for
#    the models the A/B (scripts/device_ab.sh, a call of its own) leaves out: R-Dangle_sep at intervals 1, 4, inf,
#    the 6+6 d512 Transformer, the LSTM, the tree supertagger, the interleave context model.
# Everything printed goes to OUT_DIR/check.log too: 7 files in all (a device call brings back at most 8).
# --budget-s S (default 270, the plan's): the whole call's seconds; the tests get 45% of what the imports leave,
# the benchmark the rest less a margin. Every step has its time limit (timeout).
# --cpu-smoke: the same steps on the CPU (one gpu test, tiny benchmark models): what CI runs; its numbers are
# not measurements, and it says so.
# Environment: PYTHON (default python3), STRUCTSEQ_DATA (benchmark data, or a folder of *.tar.gz of it;
# missing datasets are replaced by generated ones in the benchmark), GPU_TESTS (pytest selection, default: all
# of tests/train/test_gpu.py).
# Exit status: 0 when every step succeeded and everything in OUT_DIR would come back, else 1 (each step's
# status is in check.log's last lines).
set -uo pipefail
NAME=device_check OUT_DIR="" SMOKE="" BUDGET_S=270
source "$(dirname "${BASH_SOURCE[0]}")/device_common.sh"
parse_call_args "$@"
mkdir -p "$OUT_DIR/bench"
start_call check.log
DEVICE=cuda
SELECT=("$ROOT/tests/train/test_gpu.py")
[ -n "${GPU_TESTS:-}" ] && read -r -a SELECT <<<"$GPU_TESTS"
IMPORTS_S=30 MARGIN=15
TESTS_S=$(((BUDGET_S - IMPORTS_S - 2 * MARGIN) * 45 / 100))
BENCH_S=$((BUDGET_S - IMPORTS_S - TESTS_S - 2 * MARGIN))
BENCH_ARGS=(--budget-s $((BENCH_S * 3 / 4)) --only transformer-6+6 rdangle-sep-o1 rdangle-sep-o4 oinf lstm supertag interleave)
if [ -n "$SMOKE" ]; then
    DEVICE=cpu
    SELECT=("$ROOT/tests/train/test_gpu.py::test_every_architecture_trains_and_its_loss_falls[lstm-fp32]")
    BENCH_ARGS+=(--cpu-smoke)
fi
declare -a STATUS=()
step() {  # step NAME LIMIT_S [SIGNAL] COMMAND...: run it time-limited, say where we are and how it went
    local name=$1 limit=$2 start=$SECONDS rc sig=TERM
    shift 2
    case "$1" in INT|TERM) sig=$1; shift ;; esac
    say "== $name (limit ${limit}s)"
    timeout -s "$sig" -k 20 "$limit" "$@"
    rc=$?
    local how=ok
    [ $rc -eq 0 ] || how="FAILED (exit $rc)"
    [ $rc -eq 124 ] && how="FAILED (time limit)"
    STATUS+=("$name: $how in $((SECONDS - start))s")
    say "${STATUS[-1]}"
}

step imports "$IMPORTS_S" "$PY" - "$ROOT" "$OUT_DIR/imports.json" <<'EOF'
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
MODULES = {"pyyaml": "yaml", "pytest-timeout": "pytest_timeout", "pytest-xdist": "xdist", "import-linter": "importlinter",
           "scikit-learn": "sklearn", "pillow": "PIL"}
NEEDED_BY = {"textblob": "`structseq compose stats` (English POS tags) only", "nltk": "textblob only",
             "transformers": "model.encoder.pretrained (supertaggers on a local pretrained encoder) only",
             "hypothesis": "property tests (not the gpu tests)", "pytest-timeout": "per-test limits (optional)",
             "tokenizers": "BPE subwords (context-aware MT configs)", "matplotlib": "plots (lexicon, compose)"}
rows, missing, seen = [], [], set()
for group, reqs in groups.items():
    for req in reqs:
        dist = re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].strip().lower()
        if dist in seen:  # named by several extras: one row
            continue
        seen.add(dist)
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
# SIGINT at the limit: pytest stops as after Ctrl-C and still writes gpu-tests.xml for what ran
step "gpu tests" "$TESTS_S" INT "$PY" -m pytest "${SELECT[@]}" -m gpu -p no:cacheprovider \
    -vv -rsfE --durations=15 -o junit_family=xunit1 --junitxml "$OUT_DIR/gpu-tests.xml" "${TIMEOUT_FLAG[@]}"
step benchmark "$BENCH_S" "$PY" "$ROOT/benchmarks/bench_gpu.py" --out "$OUT_DIR/bench" "${BENCH_ARGS[@]}"

say "== summary ($((SECONDS - T0))s in all, budget ${BUDGET_S}s; results in $OUT_DIR)"
printf '  %s\n' "${STATUS[@]}"
rc=0
[[ "${STATUS[*]}" != *FAILED* ]] || rc=1
finish_call $rc
