# Shared by scripts/device_check.sh and scripts/device_reproduce.sh (sourced, not run): where the script is,
# a clock, the machine record and the package importable over the machine's own PyTorch, without network.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
T0=$SECONDS

say() { echo "[$NAME $((SECONDS - T0))s] $*"; }

# seconds left of this call's budget (BUDGET_S, counted from the start of the script)
left() { echo $((BUDGET_S - (SECONDS - T0))); }

# OUT_DIR/device.json first, so that whatever comes back names the device (needs only Python; torch if there)
write_device_json() {
    say "machine record: $1"
    timeout -k 5 60 "$PY" "$ROOT/benchmarks/bench_gpu.py" --device-json "$1" >/dev/null \
        || say "could not write $1 (Python or torch broken?)"
}

# structseq importable from this working tree: installed in editable mode without dependencies and without an
# index (the machine's own PyTorch stays), else put on PYTHONPATH
ensure_structseq() {
    if "$PY" - "$ROOT" <<'EOF' 2>/dev/null
import pathlib, sys
import structseq
sys.exit(0 if pathlib.Path(structseq.__file__).resolve().is_relative_to(pathlib.Path(sys.argv[1], "src").resolve())
         else 1)
EOF
    then
        say "structseq already imports from $ROOT/src"
        return 0
    fi
    say "pip install --no-deps --no-build-isolation --no-index -e $ROOT"
    if ! timeout -k 5 120 "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e "$ROOT"; then
        say "pip install failed: using PYTHONPATH=$ROOT/src instead"
        export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
    fi
}
