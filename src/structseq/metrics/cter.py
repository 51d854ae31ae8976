"""CoGnition compound translation error rate (CTER, Li et al. 2021).

Written from the prose description in the data's SOURCES.md (section 4) and notes/dangle.md.
Per output: the compound's modifier phrases become placeholders (mod0/mod1/mod2); BPE markers and
spaces are removed from the Chinese output; every atom must have one of its lexicon
translations as a substring of the output (the entry "/" needs no check); then the order checks
DET < N, ADJ < N, and MOD < N (only when the compound has no verb) compare the first match offset
of the modifier with the last match offset of the noun. Any failure makes the output wrong.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError
from ..paths import data_root
from ..registry import register_metric
from .base import MetricInputs, check_parallel, signature

LEXICON_FILE = Path("cognition/eval/lexicon.tsv")
ATOMS_FILE = Path("cognition/eval/atoms.json")
CATEGORIES = ("P", "V", "DET", "ADJ", "N", "MOD")
#: (modifier category, noun category): the modifier's first match must precede the noun's last.
ORDER_CHECKS = (("DET", "N"), ("ADJ", "N"), ("MOD", "N"))
SUBSETS = ("NP", "VP", "PP")
#: Published agreement of the authors' tool with human annotation (upstream README), with
#: "compound wrong" as the positive class.
PUBLISHED_AGREEMENT = {"precision": 0.9480, "recall": 0.8705}


@dataclass(frozen=True)
class Judgement:
    """Why an output is right or wrong, so that error analyses need not re-run the checks."""

    correct: bool
    missing: tuple[str, ...] = ()
    order_failures: tuple[str, ...] = ()


def _occurrences(needle: str, haystack: str) -> list[int]:
    """Every offset where `needle` occurs (the empty string occurs everywhere, so an empty
    lexicon alternative such as the one in `liked -> 喜欢/` always matches)."""
    found, start = [], haystack.find(needle)
    while start != -1:
        found.append(start)
        start = haystack.find(needle, start + 1)
    return found


def _normalise_hyp(hyp: str) -> str:
    return hyp.replace("@@ ", "").replace(" ", "")


class CTER:
    """Compound translation error rate over CoGnition's CG-test.

    `lexicon` maps an atom to its accepted translations, or to None for atoms that need no check
    (the "/" entries). `categories` maps each category in CATEGORIES to its atoms.
    """

    def __init__(
        self,
        lexicon: Mapping[str, Sequence[str] | None],
        categories: Mapping[str, Sequence[str]],
        modifier_placeholders: Mapping[str, str],
        block_size: int = 5,
    ):
        self.lexicon = {a: (None if t is None else tuple(t)) for a, t in lexicon.items()}
        self.category_of: dict[str, str] = {}
        for cat in CATEGORIES:  # a later category wins, as in the reference tool
            for atom in categories.get(cat, ()):
                self.category_of[atom] = cat
        self.placeholders = [(tuple(k.split()), v) for k, v in modifier_placeholders.items()]
        self.block_size = block_size
        canon = json.dumps(
            [
                sorted((a, t) for a, t in self.lexicon.items() if t is not None),
                sorted(a for a, t in self.lexicon.items() if t is None),
                sorted(self.category_of.items()),
                self.placeholders,
            ],
            ensure_ascii=False,
        )
        self._digest = hashlib.sha256(canon.encode("utf-8")).hexdigest()[:8]

    # -- loading -----------------------------------------------------------------------------

    @classmethod
    def from_files(cls, lexicon_path: str | Path, atoms_path: str | Path, block_size: int | None = None) -> CTER:
        """Load `lexicon.tsv` (atom<TAB>translations joined by "/"; a later line for the same atom
        replaces an earlier one, as `building` needs) and `atoms.json` (category lists and
        modifier placeholders). The block size defaults to the file's `contexts_per_compound`."""
        lexicon_path, atoms_path = Path(lexicon_path), Path(atoms_path)
        for p in (lexicon_path, atoms_path):
            if not p.is_file():
                raise DataError("missing CTER data file (see SOURCES.md section 4)", p)
        lexicon: dict[str, tuple[str, ...] | None] = {}
        for i, raw in enumerate(lexicon_path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.strip()
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0]:
                raise DataError(f"expected 'atom<TAB>translations', got {raw!r}", lexicon_path, i)
            atom, trans = parts
            lexicon[atom] = None if trans == "/" else tuple(trans.split("/"))
        try:
            atoms = json.loads(atoms_path.read_text(encoding="utf-8"))
            categories = {c: list(atoms[c]) for c in CATEGORIES}
            placeholders = dict(atoms["modifier_placeholders"])
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise DataError(f"bad atoms file: {e!r}", atoms_path) from e
        unknown = sorted(a for atoms_ in categories.values() for a in atoms_ if a not in lexicon)
        if unknown:
            raise DataError(f"atoms without a lexicon entry: {unknown}", lexicon_path)
        block = block_size if block_size is not None else int(atoms.get("contexts_per_compound", 5))
        return cls(lexicon, categories, placeholders, block_size=block)

    @classmethod
    def from_data_root(cls, root: str | Path | None = None) -> CTER:
        """The CTER of the released data, from `cognition/eval/` under the data root."""
        root = data_root(root)
        return cls.from_files(root / LEXICON_FILE, root / ATOMS_FILE)

    @property
    def signature(self) -> str:
        return signature("cter", lexicon=self._digest, block=self.block_size, tok="nospace")

    # -- judging ------------------------------------------------------------------------------

    def atoms(self, compound: str) -> list[str]:
        """Compound words with the modifier phrases replaced by their placeholders."""
        words, out, i = compound.split(), [], 0
        while i < len(words):
            for phrase, placeholder in self.placeholders:
                if tuple(words[i : i + len(phrase)]) == phrase:
                    out.append(placeholder)
                    i += len(phrase)
                    break
            else:
                out.append(words[i])
                i += 1
        return out

    def judge(self, compound: str, hyp: str) -> Judgement:
        """Check one output against its compound; see the module docstring for the rules."""
        text = _normalise_hyp(hyp)
        span: dict[str, tuple[int, int]] = {}  # category -> (first, last) match offset
        present: set[str] = set()
        missing = []
        for atom in self.atoms(compound):
            if atom not in self.category_of or atom not in self.lexicon:
                raise ValueError(f"{atom!r} in compound {compound!r} is not a CoGnition atom")
            cat = self.category_of[atom]
            present.add(cat)
            trans = self.lexicon[atom]
            if trans is None:
                span.pop(cat, None)
                continue
            offsets = [o for t in trans for o in _occurrences(t, text)]
            if not offsets:
                missing.append(atom)
                continue
            # CG-test compounds hold one atom per category; were one repeated, its last atom counts
            span[cat] = (min(offsets), max(offsets))
        if missing:
            return Judgement(False, missing=tuple(missing))
        failures = []
        for mod, noun in ORDER_CHECKS:
            if mod == "MOD" and "V" in present:
                continue  # in a VP the modifier may attach to the verb
            if mod in span and noun in span and not span[mod][0] < span[noun][1]:
                failures.append(f"{mod}<{noun}")
        return Judgement(not failures, order_failures=tuple(failures))

    def is_correct(self, compound: str, hyp: str) -> bool:
        return self.judge(compound, hyp).correct

    def score(self, compounds: Sequence[str], hyps: Sequence[str]) -> dict:
        """Instance CTER (wrong / all) and aggregate CTER (blocks of `block_size` consecutive
        lines, one compound in its contexts; a block is right only if every line is), as
        fractions. The line count must be a whole number of blocks."""
        if len(compounds) != len(hyps):
            raise ValueError(f"{len(compounds)} compounds but {len(hyps)} hypotheses")
        if not hyps or len(hyps) % self.block_size:
            raise ValueError(f"{len(hyps)} lines is not a positive multiple of the block size {self.block_size}")
        ok = [self.is_correct(c, h) for c, h in zip(compounds, hyps)]
        return {**self.rates(ok), "n": len(ok), "signature": self.signature}

    def rates(self, ok: Sequence[bool]) -> dict[str, float]:
        """Instance and aggregate error rates of per-line judgements (consecutive blocks of `block_size`)."""
        blocks = [all(ok[i : i + self.block_size]) for i in range(0, len(ok), self.block_size)]
        return {"instance": 1 - sum(ok) / len(ok), "aggregate": 1 - sum(blocks) / len(blocks)}


@register_metric("cter", scale="fraction", higher_is_better=False)
def cter_metric(inputs: MetricInputs) -> dict | None:
    """CoGnition's compound translation error rate, instance and aggregate (fractions), for outputs whose
    examples carry their `compound` (CG-test); None otherwise. Scored with `extras["cter"]` when given, else
    the released lexicon under the data root."""
    compounds = inputs.meta.get("compound")
    if compounds is None:
        return None
    check_parallel(inputs.hypotheses, compounds, "compounds")
    scorer = inputs.extras.get("cter") or CTER.from_data_root(inputs.data_root)
    return scorer.score(compounds, inputs.hyp_text)


# -- data helpers and validation against human judgements -----------------------------------


def read_compounds(root: str | Path | None = None, subset: str = "cg-test") -> list[str]:
    """Compounds of CG-test ("cg-test" = NP+VP+PP) or of one subset, one per sentence."""
    root = data_root(root)
    name = "cg-test/cg-test.compound" if subset == "cg-test" else f"cg-test/{subset}/{subset}.compound"
    path = root / "cognition" / name
    if not path.is_file():
        raise DataError("missing CoGnition compound file", path)
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]


def read_human_eval(root: str | Path | None = None, subset: str = "NP") -> list[tuple[str, str, bool]]:
    """(src, hyp, human says correct) rows of the paper's human-judged outputs for a subset."""
    path = data_root(root) / "cognition" / "human_eval" / f"{subset}_paper_outputs_human_eval.tsv.gz"
    if not path.is_file():
        raise DataError("missing CoGnition human judgement file", path)
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header != ["src", "hyp", "human_eval"]:
            raise DataError(f"unexpected header {header}", path, 1)
        for i, line in enumerate(f, 2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3 or parts[2].strip() not in ("0", "1"):
                raise DataError(f"expected 'src<TAB>hyp<TAB>0|1', got {line!r}", path, i)
            rows.append((parts[0], parts[1], parts[2].strip() == "1"))
    return rows


def _agreement(auto_ok: Sequence[bool], human_ok: Sequence[bool], positive: str) -> dict:
    flip = positive == "error"
    tp = fp = fn = tn = 0
    for a, h in zip(auto_ok, human_ok):
        a, h = (not a, not h) if flip else (a, h)
        tp += a and h
        fp += a and not h
        fn += h and not a
        tn += not a and not h
    n = tp + fp + fn + tn
    return {
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "agreement": (tp + tn) / n,
        "n": n,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
    }


def validate_against_human(root: str | Path | None = None, positive: str = "error") -> dict:
    """Precision, recall and agreement of our CTER against the paper's human judgements.

    positive="error" (default) treats "compound translated wrongly" as the detected class:
    precision = P(human says wrong | CTER says wrong), recall = P(CTER says wrong | human says
    wrong). This is the convention under which the numbers land on the published 94.80% / 87.05%;
    positive="correct" gives the mirror-image figures.
    """
    if positive not in ("error", "correct"):
        raise ValueError(f"positive must be 'error' or 'correct', not {positive!r}")
    cter = CTER.from_data_root(root)
    out: dict = {"positive": positive, "subsets": {}, "published": dict(PUBLISHED_AGREEMENT)}
    all_auto, all_human = [], []  # subsets hold whole blocks, so their concatenation keeps the blocks aligned
    for subset in SUBSETS:
        compounds = read_compounds(root, subset)
        rows = read_human_eval(root, subset)
        if len(rows) != len(compounds):
            raise DataError(f"{len(rows)} judged rows but {len(compounds)} compounds for {subset}")
        auto = [cter.is_correct(c, hyp) for c, (_, hyp, _) in zip(compounds, rows)]
        human = [ok for _, _, ok in rows]
        out["subsets"][subset] = _agreement(auto, human, positive)
        all_auto += auto
        all_human += human
    out["overall"] = _agreement(all_auto, all_human, positive)
    out["cter"] = {"ours": cter.rates(all_auto), "human": cter.rates(all_human)}  # error rates on these outputs
    out["signature"] = cter.signature
    return out
