"""The virtual environment fairseq 0.12 runs in for the benchmarks' fairseq baseline
(`structseq.testing.fairseq_baseline`): created on first use under the checkout's benchmarks/work/
(or $FAIRSEQ_VENV), apart from structseq's own, because fairseq 0.12 pins an older stack. The CPU torch goes
in first, otherwise pip pulls a multi-GB CUDA build; --no-build-isolation lets fairseq's Cython extensions
build against that torch and numpy.

Standard library and `structseq.paths` only: it runs with the main project's Python.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from structseq.paths import REPO_ROOT

#: the checkout's benchmarks/work (`structseq.paths.REPO_ROOT`): caches and the venv
WORK = REPO_ROOT / "benchmarks" / "work"
VENV = Path(os.environ.get("FAIRSEQ_VENV", WORK / "fairseq-venv"))  # override: $FAIRSEQ_VENV
VENV_BIN = VENV / "bin"

TORCH_VERSION = "2.13.0"
FAIRSEQ_REQ = "fairseq-fixed==0.12.3.1"


def log(msg: str) -> None:
    print(f"[fairseq_baseline] {msg}", file=sys.stderr, flush=True)


def _venv_ok() -> bool:
    py = VENV_BIN / "python"
    if not (py.exists() and (VENV_BIN / "fairseq-train").exists()):
        return False
    probe = subprocess.run(
        [
            str(py),
            "-c",
            "import fairseq, torch, numpy; from fairseq.data import data_utils_fast; print(fairseq.__version__)",
        ],
        capture_output=True,
        text=True,
    )
    return probe.returncode == 0


def _base_python() -> str:
    """A python3 to build the venv from (not the main project's venv itself)."""
    explicit = os.environ.get("FAIRSEQ_BASE_PYTHON")
    if explicit:
        return explicit
    base = getattr(sys, "_base_executable", None)
    if base and Path(base).exists():
        return base
    return shutil.which("python3") or sys.executable


def ensure_venv() -> Path:
    """Create and populate benchmarks/work/fairseq-venv unless it already works."""
    if _venv_ok():
        return VENV
    if VENV.exists():
        log(f"{VENV} exists but fairseq does not import; (re)installing into it")
    else:
        log(
            f"creating the fairseq virtual environment {VENV} (one-off, ~3-5 minutes: "
            "fairseq's Cython/C++ extensions are compiled)"
        )
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run([_base_python(), "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV_BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    log(f"pip install torch=={TORCH_VERSION} cython numpy wheel")
    subprocess.run(pip + [f"torch=={TORCH_VERSION}", "cython", "numpy", "wheel"], check=True)
    log(f"pip install --no-build-isolation {FAIRSEQ_REQ}")
    subprocess.run(pip + ["--no-build-isolation", FAIRSEQ_REQ], check=True)
    if not _venv_ok():
        # Fallback noted in the brief: fairseq 0.12 predates numpy 2.
        log("fairseq does not import with numpy 2; pinning numpy<2 and rebuilding fairseq")
        subprocess.run(pip + ["numpy<2"], check=True)
        subprocess.run(pip + ["--no-build-isolation", "--force-reinstall", "--no-deps", FAIRSEQ_REQ], check=True)
    if not _venv_ok():
        raise RuntimeError(f"fairseq still does not import from {VENV}; see the pip output")
    log("fairseq virtual environment ready")
    return VENV


def fairseq_env(threads: int) -> dict:
    env = dict(os.environ)
    for var in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(var, None)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env
