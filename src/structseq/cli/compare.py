"""`structseq compare A B --split S`: mean ± sd and confidence intervals over seeds, and a paired significance
test between two systems on the same examples (see `structseq.compare`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from structseq.cli.options import Checkpoint, DataRoot, Overwrite
from structseq.errors import StructseqError


def compare(
    systems: list[str] = typer.Argument(
        ...,
        metavar="A B",
        help="two systems, each a run directory, a predictions "
        "TSV of `structseq evaluate`, a quoted glob of runs ('runs/lstm-s*': one "
        "run a seed) or a comma-separated list of them",
    ),
    split: Optional[str] = typer.Option(
        None,
        "--split",
        "-s",
        help="the evaluated split of runs (a split, file or "
        "NAME:SPLIT, as given to `evaluate`); not needed for predictions files",
    ),
    test: str = typer.Option(
        "bootstrap",
        "--test",
        help="bootstrap (paired bootstrap resampling) | ar "
        "(approximate randomisation); BLEU uses sacrebleu's own bs / ar",
    ),
    resamples: int = typer.Option(1000, "--resamples", min=1, help="bootstrap resamples (or AR trials)"),
    seed: int = typer.Option(12345, "--seed", min=1, help="seed of the resampling (sacrebleu's default 12345)"),
    pairing: str = typer.Option(
        "seeds",
        "--pairing",
        help="with several seeds a side: seeds (a test on each "
        "seed pair when both sides have the same seeds; otherwise Welch's t-test over every run's score) | "
        "pooled (one test on the per-example mean over seeds; BLEU: the majority output)",
    ),
    level: float = typer.Option(
        0.95, "--level", min=0.5, max=0.999, help="confidence level of the t interval over seeds"
    ),
    fmt: str = typer.Option("markdown", "--format", "-f", help="markdown | latex | json"),
    bleu_tokenize: Optional[str] = typer.Option(
        None, "--bleu-tokenize", help="sacrebleu tokenizer [default: the one the evaluations used, else 13a]"
    ),
    names: Optional[str] = typer.Option(
        None, "--names", help="display names 'NAME_A,NAME_B' [default: A and B as given]"
    ),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="write the report here [default: stdout]"),
    no_evaluate: bool = typer.Option(
        False,
        "--no-evaluate",
        help="never evaluate a run whose predictions for --split are missing (say how to make them instead)",
    ),
    overwrite: bool = Overwrite,
    data_root: Optional[Path] = DataRoot,
    checkpoint: Optional[str] = Checkpoint,
    beam: Optional[int] = typer.Option(None, "--beam", min=1, help="compare runs' evaluations with this beam"),
    limit: Optional[int] = typer.Option(
        None, "--limit", min=1, help="compare runs' evaluations of the split's first N examples (evaluate --limit)"
    ),
    metric: list[str] = typer.Option(
        [], "--metric", help="a registered metric to compare too, computed from the predictions (repeatable)"
    ),
    allow_mixed: bool = typer.Option(
        False, "--allow-mixed", help="accept a side whose seeds were evaluated with different settings"
    ),
):
    """Compare two systems on the same examples: per metric (exact match, token accuracy, BLEU; supertag
    accuracy) each side's mean ± sd and t confidence interval over seeds, the difference, and a paired
    test's p-value (sacrebleu's paired test for BLEU; resampling examples for the rest). Each side's
    evaluation settings (checkpoint, decoding, limit) are printed and must agree across its seeds
    (--allow-mixed to accept otherwise)."""
    from structseq.compare import compare as run_compare
    from structseq.compare import load_system
    from structseq.compare.render import FORMATS, render

    if len(systems) != 2:
        raise StructseqError(
            f"expected two systems A and B, got {len(systems)} arguments; quote a glob "
            "('runs/lstm-s*') so that the shell does not expand it, or join runs with commas"
        )
    from structseq.evaluation import check_metrics

    check_metrics(metric)
    if fmt not in FORMATS:
        raise StructseqError(f"--format: unknown {fmt!r}; choices: {', '.join(FORMATS)}")
    shown = tuple(names.split(",")) if names else tuple(systems)
    if len(shown) != 2:
        raise StructseqError(f"--names: expected 'NAME_A,NAME_B', got {names!r}")
    a, b = (
        load_system(
            spec,
            key,
            split,
            evaluate=not no_evaluate,
            data_root=data_root,
            request={"checkpoint": checkpoint, "beam": beam, "limit": limit},
        )
        for spec, key in zip(systems, "AB")
    )
    report = run_compare(
        a,
        b,
        test=test,
        resamples=resamples,
        seed=seed,
        pairing=pairing,
        level=level,
        bleu_tokenize=bleu_tokenize,
        names=shown,
        split=split,
        allow_mixed=allow_mixed,
        extra_metrics=tuple(metric),
    )
    text = render(report, fmt)
    if output is None:
        print(text, end="")
    else:
        from structseq.outputs import Outputs

        Outputs([o.path for o in a + b], overwrite=overwrite).write(output, text)
