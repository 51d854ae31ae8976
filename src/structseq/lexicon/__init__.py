"""Lexicon learners of Akyürek & Andreas (2021): token-level source -> target translation rules.

Each learner registers itself (`@register_learner(NAME)`, `structseq.registry.LEARNERS`):
`learner(pairs, **settings) -> Lexicon`; pairs are `Example`s or (source, target) token sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from structseq.errors import ConfigError
from structseq.lexicon.bayesian import bayesian
from structseq.lexicon.ibm import ibm1, ibm2
from structseq.lexicon.lexicon import Lexicon
from structseq.lexicon.pmi import pmi
from structseq.lexicon.simple import simple
from structseq.registry import LEARNERS


def get_learner(name: str) -> Callable[..., Lexicon]:
    """The learner registered under `name`; an unknown name lists the choices."""
    if name not in LEARNERS:
        raise ConfigError(f"unknown lexicon method '{name}'; choices: {', '.join(sorted(LEARNERS))}")
    return LEARNERS.get(name)


def learn(data: Iterable, method: str = "simple", **settings) -> Lexicon:
    """Learn a lexicon with the named method; settings are that learner's keyword arguments."""
    learner = get_learner(method)
    try:
        return learner(data, **settings)
    except TypeError as e:
        if "unexpected keyword argument" in str(e):
            raise ConfigError(f"{method}: {e}") from None
        raise


def __getattr__(name: str):
    # Plotting pulls in matplotlib; load it only when asked for.
    if name in ("plot_lexicon", "format_table", "lexicon_matrix"):
        from structseq.lexicon import plot

        return getattr(plot, name)
    raise AttributeError(f"module 'structseq.lexicon' has no attribute {name!r}")


__all__ = [
    "LEARNERS",
    "Lexicon",
    "bayesian",
    "format_table",
    "get_learner",
    "ibm1",
    "ibm2",
    "learn",
    "lexicon_matrix",
    "plot_lexicon",
    "pmi",
    "simple",
]
