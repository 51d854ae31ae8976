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
        self._parsers: dict[tuple[int, ...], object] = {}
        self._tokens: dict[tuple[str, str], object] = {}
        self._states: dict[tuple, tuple[Tensor, frozenset]] = {}

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

    def _state(self, ip) -> tuple[Tensor, frozenset]:
        """(allowed-token mask (V,), accepted terminals) of a parser, cached by its LALR state stack; a prefix
        that is not viable (None: a token forced past the grammar, e.g. at the length limit) may only end."""
        if ip is None:
            return self.matches[-1], frozenset()
        key = tuple(ip.state_stack)
        state = self._states.get(key)
        if state is None:
            accepted = self._accepts(ip)
            rows = [self.index[t] for t in accepted if t in self.index]
            mask = self.matches[rows].any(0) if rows else torch.zeros_like(self.matches[-1])
            state = self._states[key] = (mask, accepted)
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

    def _parser(self, prefix: tuple[int, ...]):
        """The interactive parser after output ids `prefix`, from its parent's by one word."""
        if prefix in self._parsers:
            return self._parsers[prefix]
        if not prefix:
            ip = self._root()
        else:
            token = prefix[-1]
            names = self.word_terminals[token] if 0 <= token < len(self.word_terminals) else []
            ip = self._feed(self._parser(prefix[:-1]), self.space.tokens[token] if names else "", names)
        self._parsers[prefix] = ip
        return ip

    def allowed(self, prefix: Sequence[int]) -> Tensor:
        """The mask (V,) of tokens that may follow output ids `prefix` (without the start token)."""
        return self._state(self._parser(tuple(prefix)))[0]

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        rows = input_ids[:, 1:].tolist()
        length = len(rows[0]) if rows else 0
        if length == 0:
            self._parsers.clear()  # a new batch: the prefixes of earlier ones are not asked for again
        else:  # a step needs this step's prefixes and their parents only
            for key in [k for k in self._parsers if len(k) < length - 1]:
                del self._parsers[key]
        mask = torch.stack([self.allowed(r) for r in rows]).to(scores.device)
        return scores.masked_fill(~mask, float("-inf"))

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
