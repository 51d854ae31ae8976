"""Readers of document-level MT sets.

Document-level MT (Maruf et al. 2019, `<d>` files): each sentence's context is the previous N source sentences of its document joined by `<brk>`, never crossing a `<d>` boundary. DiscEvalMT (Bawden et al.
2018): contrastive pairs; `Example.target` is the correct current-sentence translation, `meta["contrast"]`
the incorrect one, `category` the phenomenon, and the context the previous source sentence (split `test`)
or the previous *target* sentence (split `test-tgtctx`: in the anaphora set only that side differs).
"""

from __future__ import annotations

import json
from pathlib import Path

from structseq.data.example import Example
from structseq.data.limits import BRK, admit  # BRK: between context sentences
from structseq.errors import DataError
from structseq.textio import iter_lines, read_text


def read_documents(source_path: str | Path, target_path: str | Path, n_context: int = 2) -> list[Example]:
    """Line-aligned `<d>` document files (Maruf et al. 2019): one example per sentence whose context is the
    previous `n_context` source sentences of its document, joined by `<brk>` (None for a document's first
    sentence). `meta`: `doc` (0-based document number) and `sent` (0-based sentence number in it)."""
    src = [line for _, line in iter_lines(source_path)]
    tgt = [line for _, line in iter_lines(target_path)]
    if len(src) != len(tgt):
        raise DataError(f"{len(src)} lines but {target_path} has {len(tgt)}", source_path)
    out: list[Example] = []
    history: list[str] = []
    doc = -1
    for i, (s, t) in enumerate(zip(src, tgt)):
        s_mark, t_mark = s.strip() == "<d>", t.strip() == "<d>"
        if s_mark != t_mark:
            raise DataError(
                f"document marker '<d>' on one side only (source: {s_mark}, target: {t_mark})", source_path, i + 1
            )
        if s_mark:
            doc, history = doc + 1, []
            continue
        if doc < 0:
            raise DataError("text before the first '<d>' document marker", source_path, i + 1)
        if not s.split() or not t.split():
            raise DataError("empty sentence", source_path, i + 1)
        prev = history[-n_context:] if n_context > 0 else []
        context = f" {BRK} ".join(prev) if prev else None
        admit(
            out,
            Example.from_text(s, t, context=context, meta={"doc": str(doc), "sent": str(len(history))}),
            i + 1,
            source_path,
            target_path,
        )
        history.append(s)
    return out


def read_contrastive(path: str | Path, context_side: str = "source") -> list[Example]:
    """A DiscEvalMT JSON file (anaphora or lexical choice) as contrastive examples: source = current English
    sentence, target = its correct (or semi-correct) translation, meta["contrast"] = the incorrect one,
    category = the phenomenon, meta["block"] = the block id; context = the previous sentence on
    `context_side` ("source": English, "target": the candidate's French previous sentence)."""
    if context_side not in ("source", "target"):
        raise ValueError(f"context_side must be source or target, not {context_side!r}")
    try:
        blocks = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise DataError(f"cannot read contrastive set: {e}", path) from None
    if not isinstance(blocks, dict):
        raise DataError(f"expected a JSON object of blocks (DiscEvalMT), found {type(blocks).__name__}", path)
    out = []
    for block_id, block in blocks.items():
        try:
            out.extend(_contrastive_block(block_id, block, context_side, path))
        except (KeyError, TypeError, AttributeError, IndexError) as e:
            raise DataError(
                f"block {block_id}: not a DiscEvalMT block ({type(e).__name__}: {e}); expected "
                "'src' and 'trg' (anaphora) or 'examples' (lexical choice)",
                path,
            ) from None
    return out


def _contrastive_block(block_id, block: dict, context_side: str, path) -> list[Example]:
    """The examples of one block of `read_contrastive`."""
    out = []
    if "examples" in block:  # lexical choice: a phenomenon per block, several examples
        pairs = [(ex["src"], ex["trg"], block.get("type", "lexical-choice")) for ex in block["examples"]]
    else:  # anaphora: one source pair, several target pairs each with its type
        pairs = [(block["src"], trg, trg.get("type", "anaphora")) for trg in block["trg"]]
    for src, trg, kind in pairs:
        good = trg.get("correct") or trg.get("semi-correct")
        bad = trg["incorrect"]
        if good is None or len(src) != 2 or len(good) != 2 or len(bad) != 2:
            raise DataError(
                f"block {block_id}: expected [previous, current] sentences with a correct and an incorrect translation",
                path,
            )
        if context_side == "target" and good[0] != bad[0]:
            raise DataError(f"block {block_id}: candidates differ in their previous target sentence", path)
        context = src[0] if context_side == "source" else good[0]
        out.append(
            Example.from_text(
                src[1], good[1], category=kind, context=context, meta={"contrast": bad[1], "block": str(block_id)}
            )
        )
    return out
