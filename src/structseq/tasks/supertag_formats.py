"""The output formats of `structseq predict` for supertag runs (`--format`), each a function of the input line
and its `Tagged` prediction (per word the k-best categories with log-probabilities, best first):

  text    `word|cat` tokens (with `task.beta` > 0 the multi form below), the task's own `format_prediction`
  cc      C&C `word|POS|cat` tokens; POS is the input's when a token is `word|POS` (or `word|POS|...`), else
          `XX` (depccg's placeholder for a missing tag)
  multi   multi-tags `word|cat1|p1|cat2|p2...`: every category within a factor `task.beta` of the best (all of
          the k-best when beta is 0), at most `task.max_tags`, probabilities descending
  json    one JSON object a sentence: `words`, `pos` (null without POS), `tags` (the best categories) and
          `kbest` (per word a list of {category, log_prob, prob}, best first)
  conll   tab-separated columns `index word POS category probability` (POS `_` when the input has none),
          one line a word, a blank line after each sentence

`--beam k` (decode.beam) sets how many categories each word's k-best list holds; every format decodes with the
same beam, so every format's best categories are the same. A word the tree decoder could not build has the
category `?` (probability 0 in `conll`, no candidates in `json` and `multi`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

FORMATS = ("text", "cc", "multi", "json", "conll")
CC_POS_PLACEHOLDER = "XX"
CONLL_EMPTY = "_"
UNBUILT = "?"


def input_pos(line: str) -> list[str] | None:
    """The POS tags of an input line's `word|POS` (or `word|POS|...`) tokens, as the supertag task reads the
    line (`parse_input`: a `|` after a token's first character splits it); None when no token has one. A line
    where only some tokens carry a tag gives None for the others' slots."""
    tags = [t.split("|")[1] if "|" in t[1:] else None for t in line.split()]
    if all(t is None for t in tags):
        return None
    return tags  # type: ignore[return-value]


def _prob(log_prob: float) -> str:
    return f"{math.exp(log_prob):.4g}"


def format_cc(words: Sequence[str], best: Sequence[str], pos: Sequence[str | None] | None) -> str:
    """C&C `word|POS|cat` tokens."""
    pos = pos or [None] * len(words)
    return " ".join(f"{w}|{p or CC_POS_PLACEHOLDER}|{c}" for w, p, c in zip(words, pos, best))


def format_multi(words: Sequence[str], kbest, beta: float, max_tags: int) -> str:
    """Multi-tags `word|cat1|p1|cat2|p2...` within a factor `beta` of each word's best category."""
    from structseq.metrics.supertag import multitag

    toks = []
    for w, kb in zip(words, kbest):
        kept = multitag(kb, beta, max_tags)
        toks.append("|".join([w] + ([f"{c}|{_prob(s)}" for c, s in kept] if kept else [UNBUILT])))
    return " ".join(toks)


def json_record(
    line_no: int, words: Sequence[str], kbest, pos: Sequence[str | None] | None, repaired: Sequence[bool] = ()
) -> dict:
    """The `json` format's object for one sentence."""
    record = {
        "line": line_no,
        "words": list(words),
        "pos": None if pos is None else list(pos),
        "tags": [k[0][0] if k else UNBUILT for k in kbest],
        "kbest": [[{"category": c, "log_prob": s, "prob": math.exp(s)} for c, s in k] for k in kbest],
    }
    if repaired:
        record["repaired"] = list(repaired)
    return record


def format_conll(words: Sequence[str], kbest, pos: Sequence[str | None] | None) -> str:
    """CoNLL-style rows `index word POS category probability`, one per word (no trailing blank line)."""
    pos = pos or [None] * len(words)
    rows = []
    for i, (w, p, k) in enumerate(zip(words, pos, kbest), 1):
        cat, prob = (k[0][0], _prob(k[0][1])) if k else (UNBUILT, "0")
        rows.append("\t".join((str(i), w, p or CONLL_EMPTY, cat, prob)))
    return "\n".join(rows)


def format_tagged(fmt: str, task, lines: Sequence[str], predictions) -> list[str]:
    """Every prediction in format `fmt` (one of FORMATS), as the chunks of text `predict` prints, one per input
    line (`conll` chunks end with the blank line that separates sentences)."""
    o = task.options
    out = []
    for i, (line, p) in enumerate(zip(lines, predictions), 1):
        pos = input_pos(line)
        if fmt == "text":
            out.append(task.format_prediction(p))
        elif fmt == "cc":
            out.append(format_cc(p.words, p.best, pos))
        elif fmt == "multi":
            out.append(format_multi(p.words, p.kbest, o.beta, o.max_tags))
        elif fmt == "json":
            out.append(json.dumps(json_record(i, p.words, p.kbest, pos, p.repaired), ensure_ascii=False))
        elif fmt == "conll":
            out.append(format_conll(p.words, p.kbest, pos) + "\n")
        else:
            raise ValueError(f"unknown supertag format {fmt!r}; formats: {', '.join(FORMATS)}")
    return out
