"""An ensemble of autoregressive models that is itself an autoregressive model, so search needs no change.

At every step each member scores the next token and the ensemble's log-probability is the log of the
members' mean probability, log (1/M) sum_m p_m(v) (fairseq's `EnsembleModel`; not the mean of the
members' log-probabilities, a product of experts). `AVERAGE` names it in evaluation signatures. The
decoder state is the list of the members' states: beam search reorders it with the one `map_state`, so
every member's state follows the same hypotheses. Teacher-forced scoring (`forward`) averages the same way,
so a hypothesis scored by the ensemble gets the sum of its per-step ensemble log-probabilities.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from structseq.errors import ConfigError
from structseq.models.base import Autoregressive, Inputs, output_limit

#: how member distributions are combined, as evaluation signatures state it
AVERAGE = "log-mean-prob"


def average_log_probs(log_probs: Sequence[Tensor]) -> Tensor:
    """log of the mean probability of M members' log-probabilities (each (..., V)), in float32 at least."""
    if len(log_probs) == 1:
        return log_probs[0]
    stacked = torch.stack([lp.float() for lp in log_probs])
    return torch.logsumexp(stacked, 0) - math.log(len(log_probs))


class Ensemble(Autoregressive):
    """Members that share their vocabularies (checked by `structseq.api.load_ensemble`), decoded as one."""

    def __init__(self, members: Sequence[nn.Module], names: Sequence[str] | None = None):
        super().__init__()
        names = list(names or (f"member {i}" for i in range(len(members))))
        if not members:
            raise ConfigError("an ensemble needs at least one run")
        flat = [m for m in members if not m.autoregressive]
        if flat:
            which = ", ".join(n for n, m in zip(names, members) if m in flat)
            raise ConfigError(f"an ensemble decodes step by step, but {which} is not an autoregressive model")
        self.members = nn.ModuleList(members)
        self.names = names
        self.width = members[0].width
        self.pad = members[0].pad

    def output_limit(self, inputs: Inputs) -> Tensor | None:
        """The smallest of the members' output limits (`structseq.decode.search.within_model`), if any."""
        limits = [limit for m in self.members if (limit := output_limit(m, inputs)) is not None]
        limits = [x for x in limits if x is not None]
        return torch.stack(limits).min(0).values if limits else None

    def encode(self, inputs: Inputs) -> list:
        return [m.encode(inputs) for m in self.members]

    def init_state(self, enc: list) -> list:
        return [m.init_state(e) for m, e in zip(self.members, enc)]

    def step(self, prev: Tensor, state: list) -> tuple[Tensor, list]:
        outs = [m.step(prev, s) for m, s in zip(self.members, state)]
        return average_log_probs([lp for lp, _ in outs]), [s for _, s in outs]

    def forward(self, batch: Inputs) -> Tensor:
        return average_log_probs([m(batch) for m in self.members])


#: which vocabulary the ids of each input tensor are from (`Remapped`); `tgt_*`: the target's
INPUT_VOCABS = {"src": "src", "tgt_in": "tgt", "tgt_out": "tgt"}


class Remapped(Autoregressive):
    """A member whose vocabularies hold the first member's tokens at other ids (runs whose held-out samples
    differed): its inputs are mapped to its own ids and its log-probabilities back to the first member's order,
    so it joins the ensemble exactly as if it had been trained with the first member's vocabularies."""

    def __init__(self, model: nn.Module, to_member: dict[str, list[int]]):
        super().__init__()
        self.model, self.width, self.pad = model, model.width, model.pad
        self.maps = {name: torch.tensor(ids) for name, ids in to_member.items()}

    def _map(self, name: str, ids: Tensor) -> Tensor:
        return self.maps[name].to(ids.device)[ids]

    def _inputs(self, inputs: Inputs) -> dict:
        out = {}
        for key, value in inputs.items():
            if key in INPUT_VOCABS and INPUT_VOCABS[key] in self.maps:
                out[key] = self._map(INPUT_VOCABS[key], value)
            elif torch.is_tensor(value) and not value.is_floating_point() and value.dtype != torch.bool:
                raise ConfigError(
                    f"an ensemble member with reordered vocabularies cannot map the input '{key}'; train every "
                    "member with one data.holdout_seed so their vocabularies are the same"
                )
            else:
                out[key] = value
        return out

    def encode(self, inputs: Inputs):
        return self.model.encode(self._inputs(inputs))

    def init_state(self, enc):
        return self.model.init_state(enc)

    def step(self, prev: Tensor, state) -> tuple[Tensor, object]:
        lp, state = self.model.step(self._map("tgt", prev), state)
        return lp[..., self.maps["tgt"].to(lp.device)], state

    def forward(self, batch: Inputs) -> Tensor:
        lp = self.model(self._inputs(batch))
        return lp[..., self.maps["tgt"].to(lp.device)]


def reorderings(first: dict, other: dict) -> dict[str, list[int]] | None:
    """For vocabularies (name -> Vocab) with the same tokens as `first`'s but some at other ids: for each
    vocabulary, `other`'s id of each of `first`'s tokens (in `first`'s id order); None when the token sets
    differ, {} when they are the same token for token."""
    if set(first) != set(other):
        return None
    maps = {}
    for name in first:
        a, b = list(first[name].itos), list(other[name].itos)
        if a == b:
            continue
        if sorted(a) != sorted(b) or len(set(a)) != len(a):
            return None
        where = {t: i for i, t in enumerate(b)}
        maps[name] = [where[t] for t in a]
    return maps


def check_members(
    names: Sequence[str], tasks: Sequence[str], vocabs: Sequence[dict], fix: str = ""
) -> list[dict[str, list[int]]]:
    """Runs fit together as an ensemble: each named once, one task, the same vocabularies, or the same tokens
    at other ids; a ConfigError naming the runs otherwise (with `fix`, what would make them fit). Returns each
    member's `reorderings` ({} where none is needed)."""
    if len(set(names)) < len(names):
        raise ConfigError(f"a run is named twice in the ensemble: {' '.join(names)}")
    if len(set(tasks)) > 1:
        raise ConfigError(
            f"an ensemble needs one task, but its runs have {', '.join(sorted(set(tasks)))} "
            f"({', '.join(f'{n}: {t}' for n, t in zip(names, tasks))})"
        )
    maps = [reorderings(vocabs[0], v) for v in vocabs]
    if any(m is None for m in maps):
        check_same_vocabs(dict(zip(names, vocabs)), fix)
    return maps


def check_same_task_settings(named: dict[str, dict]) -> None:
    """Every run (name -> its config's `task` section) encodes inputs as the first run does: the first run's
    task encodes them for all, so a differing setting (`task.source_bos`, ...) is a ConfigError naming it."""
    (first, ref), *rest = named.items()
    for name, settings in rest:
        for key in sorted(set(ref) | set(settings)):
            if ref.get(key) != settings.get(key):
                raise ConfigError(
                    f"the ensemble's runs differ in task.{key} ({first}: {ref.get(key)!r}, {name}: "
                    f"{settings.get(key)!r}); the first run's task encodes the input for all, so their "
                    "task settings must agree"
                )


def check_same_vocabs(named: dict[str, dict], fix: str = "") -> None:
    """Every run (name -> its vocabularies by name, e.g. {"src": Vocab, "tgt": Vocab}) has the first run's
    vocabularies, token for token in id order; a ConfigError naming both runs and the first difference."""
    (first, ref), *rest = named.items()
    for name, vocabs in rest:
        for key in sorted(set(ref) | set(vocabs)):
            a, b = ref.get(key), vocabs.get(key)
            a_tokens = None if a is None else list(getattr(a, "itos", a))
            b_tokens = None if b is None else list(getattr(b, "itos", b))
            if a_tokens == b_tokens:
                continue
            if a_tokens is None or b_tokens is None:
                detail = f"only {first if b_tokens is None else name} has one"
            else:
                at = next((i for i, (x, y) in enumerate(zip(a_tokens, b_tokens)) if x != y), None)
                detail = f"{len(a_tokens)} vs {len(b_tokens)} types"
                if at is not None:
                    detail += f", first difference at id {at}: {a_tokens[at]!r} vs {b_tokens[at]!r}"
            raise ConfigError(
                f"an ensemble needs the same vocabularies, but {first} and {name} differ in the "
                f"'{key}' vocabulary ({detail}): "
                + (fix or "train every member on the same data and vocabulary settings")
            )


def holdout_fix(configs: dict) -> str:
    """What would give runs (name -> Config) one vocabulary where they held out their validation examples by
    different seeds: one data.holdout_seed; '' otherwise."""
    seeds = {}
    for name, cfg in configs.items():
        if cfg.data.valid is None:
            seeds[name] = cfg.train.seed if cfg.data.holdout_seed is None else cfg.data.holdout_seed
    if len(set(seeds.values())) < 2:
        return ""
    held = ", ".join(f"{k}: {v}" for k, v in seeds.items())
    return (
        f"these runs trained on different samples, each holding out its validation examples by its own seed ({held}); "
        "train them again with one data.holdout_seed (the default since the data seed: 1), or give data.valid"
    )
