"""Where the benchmark data lives: `--data-root`, else $STRUCTSEQ_DATA, else ../shared/data."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "STRUCTSEQ_DATA"
#: the help of every `--data-root` option (`cli.options.DataRoot`, `structseq report cter`)
DATA_ROOT_HELP = f"folder with the benchmark data [default: ${ENV_VAR}, then ../shared/data]"
#: Default, relative to the working directory (a checkout with `shared/` beside it).
DEFAULT_DATA_ROOT = Path("../shared/data")
#: the checkout this package runs from (src/structseq/ -> the repository root): one place for code that finds
#: files of the checkout (the benchmarks' caches, the default data root)
REPO_ROOT = Path(__file__).resolve().parents[2]


def data_root(override: str | os.PathLike | None = None) -> Path:
    """Resolve the data root. The default also works from any working directory of a checkout."""
    if override is not None:
        return Path(override)
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    if DEFAULT_DATA_ROOT.is_dir():
        return DEFAULT_DATA_ROOT
    return REPO_ROOT.parent / "shared" / "data"
