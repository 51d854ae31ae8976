"""Our CoGnition CTER against the CoGnition paper's human judgements (RESULTS.md): precision, recall and agreement
per subset (positive class: "compound translated wrongly"), the reference tool's published figures, and both error
rates on the judged outputs.

    structseq report cter [--data-root DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Optional

import typer

from structseq.paths import DATA_ROOT_HELP, ENV_VAR

from .kinds import FORMAT


def command(
    data_root: Optional[Path] = typer.Option(None, "--data-root", envvar=ENV_VAR, help=DATA_ROOT_HELP),
    format: str = FORMAT,
) -> argparse.Namespace:
    """Our CTER against the human judgements that CoGnition ships: precision, recall and agreement per subset,
    and both error rates on those outputs.

    Example: structseq report cter"""
    return argparse.Namespace(**locals())


def render(a: argparse.Namespace) -> str:
    from structseq.metrics import validate_against_human

    out = []

    v = validate_against_human(a.data_root)
    out.append("| subset | precision | recall | agreement |")
    out.append("|---|---|---|---|")
    for name, m in [*v["subsets"].items(), ("all", v["overall"])]:
        bold = "**" if name == "all" else ""
        out.append(
            f"| {name} | {bold}{m['precision']:.2%}{bold} | {bold}{m['recall']:.2%}{bold} | {m['agreement']:.2%} |"
        )
    pub = v["published"]
    out.append(f"| reference tool (CoGnition README) | {pub['precision']:.2%} | {pub['recall']:.2%} | |")
    ours, human = v["cter"]["ours"], v["cter"]["human"]
    out.append(
        f"\nOn those {v['overall']['n']:,} outputs our CTER gives instance {ours['instance']:.2%} / aggregate "
        f"{ours['aggregate']:.2%}; the human labels give {human['instance']:.2%} / {human['aggregate']:.2%} "
        f"(`{v['signature']}`)."
    )
    return "\n".join(out)
