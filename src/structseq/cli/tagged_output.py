"""`structseq predict` for taggers: the task's own output formats (`--format cc|multi|json|conll` of a supertag
run, `structseq.tasks.supertag_formats`). Kept apart from `cli/evaluate.py`, which calls `check_format` and
`print_tagged`."""

from __future__ import annotations

from collections.abc import Sequence

from structseq.errors import ConfigError


def all_formats() -> tuple[str, ...]:
    """Every `--format` some registered task writes (for the option's help and the first check), tasks taken by
    name: the order does not depend on which task module was imported first."""
    from structseq.registry import TASKS

    return tuple(dict.fromkeys(f for _, task in sorted(TASKS.items()) for f in task.output_formats))


def task_formats(task) -> tuple[str, ...]:
    """The formats a run's task writes (`Task.output_formats`: text and json, or a tagger's own)."""
    return tuple(task.output_formats)


def check_format(fmt: str, task, *, nbest: int | None = None, sampling=None) -> bool:
    """An unsupported `--format` is one ConfigError naming the task's formats; True when the task writes the
    format itself (`print_tagged`), False for the sequence formats of `predict`. For a tagger, `--nbest` and
    `--sample` (autoregressive models only) are errors too, before any input is read (the beam is checked by the
    decoding, `decode.batched.check_beam`)."""
    formats = task_formats(task)
    if fmt not in formats:
        known = all_formats()
        if fmt not in known:
            raise ConfigError(f"'--format' must be one of {', '.join(known)}, got {fmt!r}")
        raise ConfigError(f"'--format {fmt}' is not written by a {task.name} run; its formats: {', '.join(formats)}")
    if not task.own_formats:
        return False
    if nbest is not None or sampling is not None:
        raise ConfigError(
            f"'--nbest' and '--sample' are for autoregressive models, not a {task.name} run; "
            "its k-best categories: --beam K with --format json or multi"
        )
    return True


def print_tagged(run, lines: Sequence[str], fmt: str, *, beam: int | None) -> None:
    """Tag `lines` (stdin's) with `run` and print them in `fmt` (checked by `check_format`)."""
    examples = run.parse_lines(lines, "<stdin>")
    predictions = run.decode_examples(examples, beam=beam)
    for chunk in run.task.format_outputs(fmt, lines, predictions):
        print(chunk)
