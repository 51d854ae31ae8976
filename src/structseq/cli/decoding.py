"""The decoding options of `structseq evaluate`, `predict` and `score`, declared once: `RUN_OPTIONS` (which
checkpoint, where and how many sentences at a time, `--set decode.KEY=VALUE`) for the three, `SEARCH_OPTIONS` (the
beam, the length limit, sampling) for the two that search. `decoding_options` adds them to a command, which
receives them as one `Decoding`; each command's --help lists them alike, in one panel."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field, fields
from typing import Optional

import typer

from structseq.cli.options import Checkpoint
from structseq.errors import ConfigError

PANEL = "Decoding"
DEVICE_HELP = "where the model runs: cpu | cuda | cuda:N | auto (CUDA when available) [default: auto]"

Runs = typer.Argument(
    ...,
    help="run directory; several (or a quoted glob such as 'runs/seed*') decode as one "
    "ensemble: per step, the log of the members' mean probability",
)


def _option(default, *names: str, **kw):
    return typer.Option(default, *names, rich_help_panel=PANEL, **kw)


#: (parameter, type, option) of every command that decodes a run: evaluate, predict, score
RUN_OPTIONS = (
    ("checkpoint", Optional[str], Checkpoint),
    ("batch_size", Optional[int], _option(None, "--batch-size", help="sentences decoded together (decode.batch_size)")),
    (
        "threads",
        Optional[int],
        _option(
            None,
            "--threads",
            min=1,
            help="CPU threads for torch [default: the CPUs other processes leave free, at least 1]",
        ),
    ),
    ("device", str, _option("auto", "--device", help=DEVICE_HELP)),
    (
        "set_",
        list[str],
        _option(
            [],
            "--set",
            help="decode.KEY=VALUE, checked by the config schema (repeatable), e.g. --set decode.len_penalty=0.6; "
            "model.pretrained=DIR points a run at its moved base folder (its content hash is still checked)",
        ),
    ),
    ("quiet", bool, _option(False, "--quiet", "-q", help="no progress on stderr")),
)
#: (parameter, type, option) of the commands that search: evaluate, predict
SEARCH_OPTIONS = (
    ("beam", Optional[int], _option(None, "--beam", help="beam size [default: the run's decode.beam]")),
    (
        "max_len_a",
        Optional[float],
        _option(None, "--max-len-a", help="output length limit a * |x| + b: a (decode.max_len_a)"),
    ),
    (
        "max_len_b",
        Optional[int],
        _option(None, "--max-len-b", help="output length limit a * |x| + b: b (decode.max_len_b)"),
    ),
    (
        "sample",
        bool,
        _option(
            False,
            "--sample",
            help="draw from the model (ancestral sampling) instead of searching: decode.strategy=sampling",
        ),
    ),
    (
        "top_k",
        Optional[int],
        _option(None, "--top-k", help="with sampling: only the K most probable tokens (0: all) [decode.top_k]"),
    ),
    (
        "top_p",
        Optional[float],
        _option(
            None, "--top-p", help="with sampling: the smallest set of tokens with this much probability [decode.top_p]"
        ),
    ),
    (
        "temperature",
        Optional[float],
        _option(
            None,
            "--temperature",
            help="with sampling: divide log-probabilities by T (near 0: greedy) [decode.temperature]",
        ),
    ),
    (
        "seed",
        Optional[int],
        _option(None, "--seed", help="with sampling: the random seed (same seed, same samples) [decode.seed]"),
    ),
)
#: the flags that are shorthands for decode keys: flag -> key
FLAG_KEYS = {"--beam": "beam", "--top-k": "top_k", "--top-p": "top_p", "--temperature": "temperature", "--seed": "seed"}
#: the flags that only apply with sampling
SAMPLING_FLAGS = ("--top-k", "--top-p", "--temperature", "--seed")


@dataclass
class Decoding:
    """The decoding options as a command line gave them (a command without the search options keeps their
    defaults: the run's own settings)."""

    checkpoint: str | None = None
    batch_size: int | None = None
    threads: int | None = None
    device: str = "auto"
    set_: list[str] = field(default_factory=list)
    quiet: bool = False
    beam: int | None = None
    max_len_a: float | None = None
    max_len_b: int | None = None
    sample: bool = False
    top_k: int | None = None
    top_p: float | None = None
    temperature: float | None = None
    seed: int | None = None

    def flags(self) -> dict[str, object]:
        """The shorthand flags (FLAG_KEYS) given, with their values."""
        return {flag: getattr(self, key) for flag, key in FLAG_KEYS.items() if getattr(self, key) is not None}

    def load(self, runs: list[str]):
        """The run (an ensemble for several) on its device with these options' decode settings; a shorthand flag
        beside `--set decode.KEY=` for its own key is refused rather than one silently winning. Sampling is
        applied by `sampled`."""
        from structseq.api import load_ensemble
        from structseq.run.layout import run_folders
        from structseq.train.device import set_threads

        for flag, value in self.flags().items():
            given = [o for o in self.set_ if o.split("=", 1)[0].strip() == f"decode.{FLAG_KEYS[flag]}"]
            if given:
                raise ConfigError(
                    f"{flag} {value} and --set {given[-1]} both set decode.{FLAG_KEYS[flag]}: give one of them"
                )
        device = check_device(self.device)
        set_threads(self.threads, "--threads", hint=not self.quiet)
        given = [
            f"decode.{key}={value}"
            for key, value in (
                ("batch_size", self.batch_size),
                ("max_len_a", self.max_len_a),
                ("max_len_b", self.max_len_b),
            )
            if value is not None
        ]
        decode = [o for o in self.set_ if str(o).strip().startswith("decode.")]
        moved = [o for o in self.set_ if not str(o).strip().startswith("decode.")]  # model.pretrained=NEWDIR
        run = load_ensemble(run_folders(runs), self.checkpoint, device=device, moved=moved)
        return run.with_overrides([*decode, *given])

    def sampled(self, run):
        """`run` decoding as the sampling flags say: --sample is decode.strategy=sampling, --seed S is
        decode.seed=S, ...; a sampling flag for a run that does not sample (without --sample) is refused."""
        given = {flag: v for flag, v in self.flags().items() if flag in SAMPLING_FLAGS}
        if given and not self.sample and run.config.decode.strategy != "sampling":
            raise ConfigError(
                f"{', '.join(given)} only apply with --sample (or decode.strategy: sampling); the run decodes with "
                f"decode.strategy {run.config.decode.strategy or 'null'}"
            )
        overrides = ["decode.strategy=sampling"] * self.sample + [
            f"decode.{FLAG_KEYS[f]}={v!r}" for f, v in given.items()
        ]
        return run.with_overrides(overrides)


def check_device(device: str) -> str:
    """`--device`: a device `train.device` may name (`config.DEVICES`); cuda without a CUDA device is an error
    (before the run loads)."""
    from structseq.config import DEVICES
    from structseq.fields import check_value

    check_value(device, {"pattern": DEVICES}, "--device")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise ConfigError(f"'--device {device}': no CUDA device is available here; use cpu or auto")
    return device


def decoding_options(search: bool = True):
    """Decorator of a command taking `decoding: Decoding`: its signature gains the options of `RUN_OPTIONS` (and
    of `SEARCH_OPTIONS` where `search`), which typer parses and the command receives as one `Decoding`."""
    specs = RUN_OPTIONS + (SEARCH_OPTIONS if search else ())
    assert {name for name, _, _ in specs} <= {f.name for f in fields(Decoding)}

    def deco(command):
        signature = inspect.signature(command)
        params = [p for p in signature.parameters.values() if p.name != "decoding"]
        added = [
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option, annotation=hint)
            for name, hint, option in specs
        ]

        @functools.wraps(command)
        def with_decoding(*args, **kwargs):
            values = {name: kwargs.pop(name) for name, _, _ in specs if name in kwargs}
            return command(*args, decoding=Decoding(**values), **kwargs)

        with_decoding.__signature__ = signature.replace(parameters=[*params, *added])
        with_decoding.__annotations__ = {
            **{k: v for k, v in command.__annotations__.items() if k != "decoding"},
            **{name: hint for name, hint, _ in specs},
        }
        return with_decoding

    return deco
