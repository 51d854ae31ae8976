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

# STRUCTSEQ_DATA naming a carried folder of *.tar.gz archives (COGS: 11 MiB as text, 1.7 MiB packed; what travels
# with a call is at most 64 MiB): unpacked once into a temporary folder, which STRUCTSEQ_DATA then names
unpack_data() {
    local src=${STRUCTSEQ_DATA:-} dir a
    [ -n "$src" ] && compgen -G "$src/*.tar.gz" >/dev/null || return 0
    dir="$(mktemp -d)"
    for a in "$src"/*.tar.gz; do tar -xzf "$a" -C "$dir" || say "cannot unpack $a"; done
    for a in "$src"/*/; do [ -d "$a" ] && cp -r "$a" "$dir"/; done  # plain dataset folders beside them
    export STRUCTSEQ_DATA="$dir"
    say "data: the archives of $src unpacked into $dir"
}

# the end of every device script: whether what it left in OUT_DIR would all come back from a call (the lease's
# limits, scripts/lease_plan.py), and in --cpu-smoke the word that none of its numbers is a measurement
check_returned() {
    local rc=0
    "$PY" "$ROOT/scripts/lease_plan.py" returned "$OUT_DIR" || rc=1
    [ -z "${SMOKE:-}" ] || say "--cpu-smoke: a tiny model on the CPU; none of these numbers is a measurement"
    return $rc
}

# the arguments every call's script takes: OUT_DIR, --budget-s S, --cpu-smoke, -h; the others are left in REST
parse_call_args() {
    REST=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --cpu-smoke) SMOKE=1 ;;
            --budget-s) BUDGET_S=$2; shift ;;
            -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
            -*) REST+=("$1") ;;
            *) if [ -z "$OUT_DIR" ]; then OUT_DIR=$1; else REST+=("$1"); fi ;;
        esac
        shift
    done
    [ -n "$OUT_DIR" ] || { awk 'NR == 4' "$0" | sed 's/^#[[:space:]]*/usage: /' >&2; exit 2; }
}

# a call's start: OUT_DIR made (absolute), everything printed also into OUT_DIR/LOG, the machine record first,
# structseq importable from this tree, the data unpacked
start_call() {  # start_call LOG
    mkdir -p "$OUT_DIR" && OUT_DIR="$(cd "$OUT_DIR" && pwd)"
    exec > >(tee -a "$OUT_DIR/$1") 2>&1
    TEE=$!
    cd "$ROOT" || exit 2
    say "results in $OUT_DIR; budget ${BUDGET_S}s; $ROOT at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no git)')"
    write_device_json "$OUT_DIR/device.json"
    ensure_structseq
    unpack_data
}

# a call's end: exit RC, or 1 when what is in OUT_DIR would not all come back; the log complete first
finish_call() {  # finish_call RC
    local rc=$1
    check_returned || rc=1
    say "reached its end in $((SECONDS - T0))s: exit $rc"
    exec >&- 2>&-
    wait "$TEE"
    exit "$rc"
}
