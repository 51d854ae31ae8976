"""Grammar constraints: `decode.grammar: NAME` allows at each step only the output tokens that keep a row's prefix
a viable prefix of the grammar's language, and </s> only where the prefix is a whole sentence of it (Shin et al.
2021; PICARD, Scholak et al. 2021). Any strategy and any sequence model: it is a per-step processor
(`GrammarConstraint`, rank 50, transformers' place for prefix constraints).

The grammar work is lark's (LALR, `Lark.parse_interactive`): a row's prefix is fed word by word to an interactive
parser, and `accepts()` names the terminals that may come next. Each output word is one terminal: a word may
follow when it fully matches an accepted terminal (a string, or a pattern), as lark's contextual lexer would lex
it alone; a word matching several is fed as the one of highest priority, strings before patterns (lark's
order). Work is cached twice: the parser of each prefix (a step feeds only its last word to its parent's
parser; beams that share a prefix share it) and the allowed-token mask of each parser stack (most prefixes
of a long output reach a stack seen before), so a step costs one `feed_token` per new prefix and mask lookups.

Grammars ship as `.lark` files beside this module (`grammars/NAME.lark`, each registered under its file name;
its first comment line is its description); a plugin registers its own with `registry.register_grammar`. For
subword outputs (a pretrained tokenizer's pieces) the grammar would have to be checked over the detokenised
text; that is not built yet (docs/decoding.md compares the libraries for it) and is refused in one line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from structseq.decode.processors.base import LogitsProcessor, OutputSpace
from structseq.errors import ConfigError
from structseq.registry import GRAMMARS, Grammar, register_grammar

#: where a grammar constraint applies among the processors (transformers' rank of prefix constraints)
GRAMMAR_RANK = 50
_MULT = 6364136223846793005  # Knuth's MMIX multiplier: the prefix hash's base
FOLDER = Path(__file__).with_name("grammars")


def _register_shipped() -> None:
    for path in sorted(FOLDER.glob("*.lark")):
        text = path.read_text(encoding="utf-8")
        first = text.splitlines()[0] if text else ""
        register_grammar(path.stem, text, doc=first.lstrip("/ ").strip())


_register_shipped()


class GrammarConstraint(LogitsProcessor):
    """Only tokens that keep each row's prefix (input_ids after the start token) viable in `grammar`; </s> only
    after a whole sentence of it. `space.tokens` must be the output words themselves (no subword pieces)."""

    def __init__(self, grammar: Grammar, space: OutputSpace):
        from lark import Lark
        from lark.exceptions import GrammarError

        if space.detokenize is not None:
            raise ConfigError(
                f"'decode.grammar': grammar '{grammar.name}' constrains output words, but this model outputs "
                "subword pieces; decode without decode.grammar (docs/decoding.md)"
            )
        try:
            self.parser = Lark(grammar.text, parser="lalr", start=grammar.start)
        except GrammarError as e:
            raise ConfigError(f"'decode.grammar': grammar '{grammar.name}' is not an LALR grammar: {e}") from None
        self.name, self.space = grammar.name, space
        order = sorted(
            self.parser.terminals, key=lambda t: (-t.priority, type(t.pattern).__name__ != "PatternStr", t.name)
        )
        self._patterns = [(t.name, re.compile(t.pattern.to_regexp())) for t in order]
        self._names: dict[str, list[str]] = {}
        special = {space.eos, space.bos, space.pad}
        self.word_terminals = [[] if i in special else self.terminals_of(w) for i, w in enumerate(space.tokens)]
        self.index = {name: i for i, (name, _) in enumerate(self._patterns)} | {"$END": len(order)}
        self.matches = torch.zeros(len(order) + 1, len(space.tokens), dtype=torch.bool)  # last row: $END, </s>
        self.matches[-1, space.eos] = True
        for i, names in enumerate(self.word_terminals):
            for name in names:
                self.matches[self.index[name], i] = True
        self._now: dict[int, tuple] = {}  # this step's prefixes (by `_hash`): (parser, mask row)
        self._length, self._powers = -1, torch.ones(1, dtype=torch.long)
        self._tokens: dict[tuple[str, str], object] = {}
        self._states: dict[tuple, tuple[int, frozenset]] = {}
        self._table = self.matches[-1:].clone()  # each distinct allowed-token mask once; row 0: </s> only
        self._device_table, self._on = self._table, None  # the table where the scores are
        if not self.allowed(()).any():  # every first score -inf: greedy picked a word outside, a beam nothing
            first = " ".join(sorted(self._state(self._root())[1]))
            raise ConfigError(
                f"'decode.grammar': no output word of this model can start a sentence of grammar '{grammar.name}' "
                f"(its first terminals: {first}); decode without decode.grammar or with a grammar of its outputs"
            )

    def terminals_of(self, word: str) -> list[str]:
        """The terminals `word` fully matches, highest priority first (strings before patterns)."""
        names = self._names.get(word)
        if names is None:
            names = self._names[word] = [n for n, pattern in self._patterns if pattern.fullmatch(word)]
        return names

    def _root(self):
        """A parser state at the start (lark's `ParserState` of an interactive parse, building no trees)."""
        from lark.parsers.lalr_parser_state import ParseConf

        state = self.parser.parse_interactive("").parser_state
        conf = state.parse_conf
        state.parse_conf = ParseConf(conf.parse_table, {}, conf.start)  # no trees: only viability
        return state

    def _accepts(self, state) -> frozenset:
        """The terminals that may come next (lark's `InteractiveParser.accepts`, on the bare parser state)."""
        from lark.exceptions import UnexpectedToken

        out = set()
        for name in state.parse_conf.states[state.state_stack[-1]]:
            if name.isupper():
                try:
                    state.copy(deepcopy_values=False).feed_token(self._token(name, ""), name == "$END")
                except UnexpectedToken:
                    continue
                out.add(name)
        return frozenset(out)

    def _token(self, name: str, word: str):
        from lark import Token

        token = self._tokens.get((name, word))
        if token is None:
            token = self._tokens[name, word] = Token(name, word)
        return token

    def _state(self, ip) -> tuple[int, frozenset]:
        """(row of `self._table`: the allowed-token mask, accepted terminals) of a parser, cached by its LALR
        state stack; a prefix that is not viable (None: a token forced past the grammar, e.g. at the length
        limit) may only end (row 0)."""
        if ip is None:
            return 0, frozenset()
        key = tuple(ip.state_stack)
        state = self._states.get(key)
        if state is None:
            accepted = self._accepts(ip)
            rows = [self.index[t] for t in accepted if t in self.index]
            mask = self.matches[rows].any(0) if rows else torch.zeros_like(self.matches[-1])
            self._table = torch.cat([self._table, mask[None]])
            state = self._states[key] = (self._table.shape[0] - 1, accepted)
        return state

    def _feed(self, ip, word: str, names: Sequence[str]):
        """A copy of parser `ip` after `word` (None where no terminal it matches may follow)."""
        accepted = self._state(ip)[1]
        name = next((n for n in names if n in accepted), None)
        if ip is None or name is None:
            return None
        ip = ip.copy(deepcopy_values=False)
        ip.feed_token(self._token(name, word))
        return ip

    def _after(self, ip, token: int):
        """A copy of parser `ip` after output id `token` (None: not viable)."""
        names = self.word_terminals[token] if 0 <= token < len(self.word_terminals) else []
        return self._feed(ip, self.space.tokens[token] if names else "", names)

    def _parser(self, prefix: tuple[int, ...]):
        """The parser after output ids `prefix`, from the root word by word (what `allowed` asks; a search's
        steps take `__call__`'s cache instead)."""
        ip = self._root()
        for token in prefix:
            ip = self._after(ip, token) if ip is not None else None
        return ip

    def allowed(self, prefix: Sequence[int]) -> Tensor:
        """The mask (V,) of tokens that may follow output ids `prefix` (without the start token)."""
        row = self._state(self._parser(tuple(prefix)))[0]  # may add a row to the table
        return self._table[row]

    def _hash(self, ids: Tensor) -> Tensor:
        """Each row's prefix as one int64 (sum of (id + 1) * M ** position, wrapping): a cache key."""
        t = ids.shape[1]
        while self._powers.shape[0] < t:
            self._powers = torch.cat([self._powers, self._powers[-1:] * _MULT])
        return ((ids + 1) * self._powers[:t]).sum(1)

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        ids = input_ids[:, 1:].cpu()
        n, t = ids.shape
        # the parsers of the last step's prefixes, keyed by hash: a step feeds each new prefix's last word to its
        # parent's parser (a search calls every step from t = 0; anything else is parsed from the root)
        before = self._now if t == self._length + 1 else None
        now: dict[int, tuple] = {}
        if t == 0:
            keys, parents, last = [0] * n, None, None
        else:
            h = self._hash(ids)
            keys = h.tolist()
            parents = (h - (ids[:, -1] + 1) * self._powers[t - 1]).tolist()
            last = ids[:, -1].tolist()
        which = []
        for i, key in enumerate(keys):
            entry = now.get(key)
            if entry is None:
                if t == 0:
                    ip = self._root()
                elif before is not None and parents[i] in before:
                    ip = before[parents[i]][0]
                    ip = self._after(ip, last[i]) if ip is not None else None
                else:
                    ip = self._parser(tuple(ids[i].tolist()))
                entry = now[key] = (ip, self._state(ip)[0])
            which.append(entry[1])
        self._now, self._length = now, t
        if self._on != scores.device or self._device_table.shape[0] != self._table.shape[0]:
            self._device_table, self._on = self._table.to(scores.device), scores.device
        return scores.masked_fill(~self._device_table[torch.tensor(which, device=scores.device)], float("-inf"))

    def accepts(self, words: Sequence[str]) -> bool:
        """Whether `words` (a whole output) is a sentence of the grammar, fed word by word as in decoding."""
        ip = self._root()
        for w in words:
            ip = self._feed(ip, w, self.terminals_of(w))
            if ip is None:
                return False
        return "$END" in self._state(ip)[1]


def grammar_constraint(name: str, space: OutputSpace) -> GrammarConstraint:
    """The constraint `decode.grammar: NAME` names, over the model's output space."""
    return GrammarConstraint(GRAMMARS.get(name), space)
