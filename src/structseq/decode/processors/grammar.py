"""Grammar constraints: `decode.grammar: NAME` allows at each step only the output tokens that keep a row's prefix
a viable prefix of the grammar's language, and </s> only where the prefix is a whole sentence of it (Shin et al.
2021; PICARD, Scholak et al. 2021). Any strategy and any sequence model: it is a per-step processor
(`GrammarConstraint`, rank 50, transformers' place for prefix constraints).

It is length-aware: a search hands it each row's budget (`remaining`: the output words it may still emit before
it must end, this step's included; `LogitsProcessor.reads_remaining`), and a word is allowed only where the
shortest completion of the grammar after it still fits, so no output is cut at the length limit ill-formed:
every output is a sentence of the grammar whenever the limit allows one (else a one-line ConfigError naming the
limit, before the first step). Without a budget (a Python caller), any word with some completion is allowed.

The grammar work is lark's (LALR, `Lark.parse_interactive`): a row's prefix is fed word by word to an interactive
parser, and `accepts()` names the terminals that may come next. Each output word is one terminal: a word may
follow when it fully matches an accepted terminal (a string, or a pattern), as lark's contextual lexer would lex
it alone; a word matching several is fed as the one of highest priority, strings before patterns (lark's
order). The words are grouped by the terminals they match (a token -> group map, computed once), so a parser
state's verdict is one cost per group: 1 + the fewest words that complete a sentence after the group's word
(inf: none), from lark's LALR tables (`grammar_completion`: exact, in work of the stack's depth), and </s>'s
cost 0 where the state accepts the end. Work is cached three times: the parser of each prefix (a step feeds only
its last word to its parent's parser; beams that share a prefix share it), the group costs of each parser stack
(most prefixes of a long output reach a stack seen before) and each stack's shortest completion, so a step costs
one `feed_token` per new prefix, lookups and one (rows, V) comparison with the budgets.

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
from structseq.decode.processors.grammar_completion import Completions
from structseq.errors import ConfigError
from structseq.registry import GRAMMARS, Grammar, register_grammar

#: where a grammar constraint applies among the processors (transformers' rank of prefix constraints)
GRAMMAR_RANK = 50
_MULT = 6364136223846793005  # Knuth's MMIX multiplier: the prefix hash's base
FOLDER = Path(__file__).with_name("grammars")
INF = float("inf")


def _register_shipped() -> None:
    for path in sorted(FOLDER.glob("*.lark")):
        text = path.read_text(encoding="utf-8")
        first = text.splitlines()[0] if text else ""
        register_grammar(path.stem, text, doc=first.lstrip("/ ").strip())


_register_shipped()


class GrammarConstraint(LogitsProcessor):
    """Only tokens that keep each row's prefix (input_ids after the start token) viable in `grammar` and, given
    `remaining`, completable within it; </s> only after a whole sentence of it. `space.tokens` must be the output
    words themselves (no subword pieces)."""

    reads_remaining = True

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
        # groups of words matching the same terminals: 0 is </s>, 1 never allowed (specials, words of no terminal)
        index: dict[tuple[str, ...], int] = {(): 1}
        group = [index.setdefault(tuple(names), len(index) + 1) for names in self.word_terminals]
        group[space.eos] = 0
        self.groups = [("$END",), (), *(names for names in index if names)]
        self.group_of = torch.tensor(group, dtype=torch.long)
        self._now: dict[int, tuple] = {}  # this step's prefixes (by `_hash`): (parser, table row)
        self._length, self._powers = -1, torch.ones(1, dtype=torch.long)
        self._tokens: dict[tuple[str, str], object] = {}
        self._accepted: dict[tuple, frozenset] = {}
        self._rows: dict[tuple, int] = {}
        # a terminal some word is fed as wherever it may come (the word's first): what completions may use
        self.completions = Completions(self.parser, {names[0] for names in self.word_terminals if names})
        # each distinct row of group costs once; row 0: a prefix that is not viable may only end
        self._table = torch.full((1, len(self.groups)), INF)
        self._table[0, 0] = 0.0
        self._device_table, self._group_on, self._on = self._table, self.group_of, None  # where the scores are
        if not self.allowed(()).any():  # every first score -inf: greedy picked a word outside, a beam nothing
            first = " ".join(sorted(self._accepts(self._root())))
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
        """The terminals that may come next (lark's `InteractiveParser.accepts`, on the bare parser state),
        cached by its LALR state stack; none after a prefix that is not viable (None)."""
        from lark.exceptions import UnexpectedToken

        if state is None:
            return frozenset()
        key = tuple(state.state_stack)
        known = self._accepted.get(key)
        if known is not None:
            return known
        out = set()
        for name in state.parse_conf.states[state.state_stack[-1]]:
            if name.isupper():
                try:
                    state.copy(deepcopy_values=False).feed_token(self._token(name, ""), name == "$END")
                except UnexpectedToken:
                    continue
                out.add(name)
        out = self._accepted[key] = frozenset(out)
        return out

    def _token(self, name: str, word: str):
        from lark import Token

        token = self._tokens.get((name, word))
        if token is None:
            token = self._tokens[name, word] = Token(name, word)
        return token

    def _fed_as(self, accepted: frozenset) -> list[str | None]:
        """Per word group (from 2), the terminal its words are fed as after a state accepting `accepted`."""
        return [next((n for n in names if n in accepted), None) for names in self.groups[2:]]

    def _shortest(self, ip) -> float:
        """The fewest output words after which parser `ip` has read a whole sentence (0: it has; inf: no words
        of this vocabulary complete one), from lark's LALR tables (`grammar_completion`)."""
        return self.completions.cost(tuple(ip.state_stack))

    def _row(self, ip) -> int:
        """The row of `self._table` of parser `ip` (None: not viable, e.g. a token forced at the length limit:
        row 0, it may only end): per word group, the words a completion needs after it, cached by stack."""
        if ip is None:
            return 0
        key = tuple(ip.state_stack)
        row = self._rows.get(key)
        if row is None:
            accepted = self._accepts(ip)
            costs = [0.0 if "$END" in accepted else INF, INF]
            for name in self._fed_as(accepted):
                if name is None:
                    costs.append(INF)
                    continue
                q = ip.copy(deepcopy_values=False)
                q.feed_token(self._token(name, ""))
                costs.append(1.0 + self._shortest(q))
            self._table = torch.cat([self._table, torch.tensor([costs])])
            row = self._rows[key] = self._table.shape[0] - 1
        return row

    def _feed(self, ip, word: str, names: Sequence[str]):
        """A copy of parser `ip` after `word` (None where no terminal it matches may follow)."""
        accepted = self._accepts(ip)
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

    def shortest(self, prefix: Sequence[int] = ()) -> float:
        """The fewest output words that complete output ids `prefix` into a sentence (inf: none)."""
        ip = self._parser(tuple(prefix))
        return INF if ip is None else self._shortest(ip)

    def _masks(self, rows: Tensor, remaining: Tensor | None) -> Tensor:
        """The allowed-token masks (len(rows), V) of table rows `rows` under each row's budget (None: any)."""
        costs = self._device_table[rows][:, self._group_on]
        if remaining is None:
            return costs.isfinite()
        return costs <= remaining.to(costs.device, costs.dtype)[:, None]

    def _sync(self, device) -> None:
        if self._on != device or self._device_table.shape[0] != self._table.shape[0]:
            self._device_table, self._group_on, self._on = self._table.to(device), self.group_of.to(device), device

    def allowed(self, prefix: Sequence[int], remaining: int | None = None) -> Tensor:
        """The mask (V,) of tokens that may follow output ids `prefix` (without the start token), given
        `remaining` words of budget (this one included; None: unbounded)."""
        row = self._row(self._parser(tuple(prefix)))  # may add a row to the table
        self._sync(self._table.device)
        budget = None if remaining is None else torch.tensor([float(remaining)])
        return self._masks(torch.tensor([row]), budget)[0]

    def _hash(self, ids: Tensor) -> Tensor:
        """Each row's prefix as one int64 (sum of (id + 1) * M ** position, wrapping): a cache key."""
        t = ids.shape[1]
        while self._powers.shape[0] < t:
            self._powers = torch.cat([self._powers, self._powers[-1:] * _MULT])
        return ((ids + 1) * self._powers[:t]).sum(1)

    def _check_budget(self, remaining: Tensor) -> None:
        """A one-line ConfigError where a row's whole budget cannot hold the shortest sentence."""
        fewest, least = self._shortest(self._root()), int(remaining.min())
        if least < fewest:
            raise ConfigError(
                f"'decode.max_len_b': the length limit (decode.max_len_a * |x| + max_len_b) allows an output of "
                f"{least} word(s), but grammar '{self.name}' has no sentence of this model's words shorter than "
                f"{fewest:g}; raise decode.max_len_b (or max_len_a)"
            )

    def __call__(self, input_ids: Tensor, scores: Tensor, remaining: Tensor | None = None) -> Tensor:
        ids = input_ids[:, 1:].cpu()
        n, t = ids.shape
        if t == 0 and remaining is not None and n:
            self._check_budget(remaining)
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
                entry = now[key] = (ip, self._row(ip))
            which.append(entry[1])
        self._now, self._length = now, t
        self._sync(scores.device)
        mask = self._masks(torch.tensor(which, device=scores.device), remaining)
        return scores.masked_fill(~mask, float("-inf"))

    def accepts(self, words: Sequence[str]) -> bool:
        """Whether `words` (a whole output) is a sentence of the grammar, fed word by word as in decoding."""
        ip = self._root()
        for w in words:
            ip = self._feed(ip, w, self.terminals_of(w))
            if ip is None:
                return False
        return "$END" in self._accepts(ip)


def grammar_constraint(name: str, space: OutputSpace) -> GrammarConstraint:
    """The constraint `decode.grammar: NAME` names, over the model's output space."""
    return GrammarConstraint(GRAMMARS.get(name), space)
