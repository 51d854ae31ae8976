"""Shortest completions of an LALR parse (what makes `decode.grammar` length-aware): given the state stack of
lark's parser after a prefix, the fewest terminals that complete it into a sentence.

From lark's own tables (`ParseConf.states`: each state's shifts and gotos) and rules, the LR(0) kernel items of
each state are rebuilt (an item A -> alpha . beta of a state: alpha is on top of the stack), and the least
number of words each grammar symbol derives (`minlen`: a terminal 1 where some output word is fed as it, else
inf). A stack s_0 .. s_k completes, at the least cost over the kernel items A -> alpha . beta of s_k, by
deriving beta (`minlen`), reducing A (popping |alpha| states) and completing the stack that the goto on A from
s_(k - |alpha|) leaves; the stack that has read a whole sentence (the start state, then the goto on the start
symbol) costs 0. An item whose goto the popped stack lacks belongs to another path into s_k and is skipped, so
every completion counted is one lark's parser reads. Costs are cached per stack; each recursion pops at least
as much as it pushes, so a completion costs work in the stack's depth, not in the completion's length (a
breadth-first search over parser states grows with the number of terminals to the power of the length).
"""

from __future__ import annotations

from collections.abc import Iterable

INF = float("inf")


class Completions:
    """`cost(stack)`: the fewest terminals after which a parser at `stack` (lark's `state_stack`) has read a
    sentence of the grammar of `parser` (a `Lark` object, LALR), terminals limited to `realizable`."""

    def __init__(self, parser, realizable: Iterable[str]):
        from lark.parsers.lalr_analysis import Shift

        conf = parser.parse_interactive("").parser_state.parse_conf
        self.table, self.start_state, self.end_state = conf.states, conf.start_state, conf.end_state
        self.start = conf.start
        rules = parser.parser.parser.parser_conf.rules
        by_origin: dict[str, list] = {}
        for rule in rules:
            by_origin.setdefault(rule.origin.name, []).append(rule)
        self.minlen = _minlen(rules, set(realizable))
        self.kernels = _kernels(self.table, self.start_state, self.start, by_origin, Shift)
        self._cost: dict[tuple, float] = {}

    def of(self, name: str) -> float:
        """The fewest terminals symbol `name` derives (0 for $END)."""
        return self.minlen.get(name, INF)

    def cost(self, stack: tuple) -> float:
        known = self._cost.get(stack)
        if known is not None:
            return known
        self._cost[stack] = INF  # in progress: a cycle of unit reductions (never in an LALR grammar) counts none
        k = len(stack) - 1
        if k == 0:
            best = self.of(self.start)
        elif k == 1 and stack[1] == self.end_state:
            best = 0.0
        else:
            best = INF
            for rule, dot in self.kernels.get(stack[-1], ()):
                if dot > k:
                    continue
                rest = sum(self.of(s.name) for s in rule.expansion[dot:])
                if rest >= best:
                    continue
                goto = self.table[stack[k - dot]].get(rule.origin.name)
                if goto is None:
                    continue
                best = min(best, rest + self.cost((*stack[: k - dot + 1], goto[1])))
        self._cost[stack] = best
        return best


def _minlen(rules, realizable: set[str]) -> dict[str, float]:
    """The fewest terminals each symbol derives: a fixpoint over the rules."""
    out: dict[str, float] = {"$END": 0.0}
    for rule in rules:
        for s in rule.expansion:
            if s.is_term and s.name != "$END":
                out[s.name] = 1.0 if s.name in realizable else INF
    changed = True
    while changed:
        changed = False
        for rule in rules:
            total = sum(out.get(s.name, INF) for s in rule.expansion)
            if total < out.get(rule.origin.name, INF):
                out[rule.origin.name] = total
                changed = True
    return out


def _kernels(table, start_state, start: str, by_origin, shift) -> dict:
    """Each state's LR(0) kernel items (rule, dot > 0), following the table's shifts and gotos from the start
    state, whose closure begins at the start symbol's rules."""

    def closure(items: set) -> set:
        out, todo = set(items), list(items)
        while todo:
            rule, dot = todo.pop()
            if dot < len(rule.expansion) and not rule.expansion[dot].is_term:
                for r in by_origin.get(rule.expansion[dot].name, ()):
                    if (r, 0) not in out:
                        out.add((r, 0))
                        todo.append((r, 0))
        return out

    kernels: dict = {start_state: set()}
    seeds = {start_state: {(r, 0) for r in by_origin.get(start, ())}}
    todo = [start_state]
    while todo:
        state = todo.pop()
        items = closure(kernels[state] | seeds.get(state, set()))
        advanced: dict[str, set] = {}
        for rule, dot in items:
            if dot < len(rule.expansion):
                advanced.setdefault(rule.expansion[dot].name, set()).add((rule, dot + 1))
        for symbol, new in advanced.items():
            action = table[state].get(symbol)
            if action is None or action[0] is not shift:
                continue
            target = action[1]
            have = kernels.setdefault(target, set())
            if not new <= have:
                have |= new
                todo.append(target)
    return kernels
