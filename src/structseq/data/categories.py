"""Categories of categorial grammars as binary trees: parsing, printing, tree positions.

A tree is an atom (a string) or a tuple `(symbol, left, right)`. Two notations are read and written back
verbatim (`print_category(parse_category(s)) == s` for canonical strings):

- Grail / TLGbank (French): `dr(m,A,B)` = A/B -> ('/m', A, B); `dl(m,B,A)` = B\\A -> ('\\m', B, A) (formula
  order kept); `p(m,A,B)` -> ('*m', A, B); the unary modalities `dia(m,A)` and `box(m,A)` become pseudo-binary
  nodes ('<>m', A, BLANK) and ('[]m', A, BLANK) with an artificial blank leaf in the right slot, so every
  symbol has arity 0 or 2 and the encoding is reversible.
- CCG (CCGbank, C&C, EasyCCG): `\\` and `/` are binary ('/', result, argument); features stay inside the atom
  name (`S[dcl]`); printed fully bracketed except the outermost level (`(S[dcl]\\NP)/NP`); bare slashes
  associate to the left when parsing (`S\\NP/NP` = `(S\\NP)/NP`).

Positions: the root is 1 and the children of k are 2k (left) and 2k+1 (right); depth t holds 2^t .. 2^(t+1)-1.
A category deeper than `MAX_DEPTH` is refused when parsed (a CategoryError; readers make it a DataError naming
the file and line), so that positions stay small integers and the tree supertagger's tables stay small.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

Tree = str | tuple  # an atom, or (symbol, left, right)

BLANK = "_"  # the artificial leaf of a pseudo-binary unary modality
_GRAIL_BINARY = {"dr": "/", "dl": "\\", "p": "*"}
_GRAIL_UNARY = {"dia": "<>", "box": "[]"}
_GRAIL_NAME = {v: k for k, v in {**_GRAIL_BINARY, **_GRAIL_UNARY}.items()}
_MODED = re.compile(r"^(/|\\|\*|<>|\[\])(\w+)$")  # a Grail connective with its mode: '/0', '<>1'
_GRAIL_START = re.compile(r"^(dr|dl|p|dia|box)\(")

#: The deepest category accepted (the root is depth 0): node positions reach 2^(MAX_DEPTH+1) - 1 and the tree
#: supertagger's path table holds 2^(max_depth+1) rows (`model.max_depth` is bounded by it too). The deepest
#: category of TLGbank light has depth 7.
MAX_DEPTH = 16


class CategoryError(ValueError):
    """A string that is not a category (the message names the string and the problem)."""


# ---------------------------------------------------------------- symbols


def is_binary(symbol: str) -> bool:
    """Connectives (binary or pseudo-binary); every other symbol is a leaf."""
    return symbol in ("/", "\\") or _MODED.match(symbol) is not None


def is_unary(symbol: str) -> bool:
    """A unary modality encoded pseudo-binary (its right child is always BLANK)."""
    m = _MODED.match(symbol)
    return m is not None and m.group(1) in ("<>", "[]")


# ---------------------------------------------------------------- parsing


def parse_category(text: str) -> Tree:
    """A category string (Grail or CCG notation, detected from the string) as a tree."""
    text = text.strip()
    if not text:
        raise CategoryError("empty category")
    try:
        if _GRAIL_START.match(text):
            tree, end = _parse_grail(text, 0)
            if end != len(text):
                raise CategoryError(f"{text!r}: trailing text at {end}")
        else:
            tree = _parse_ccg(text)
        d = depth(tree)
        if d > MAX_DEPTH:
            raise CategoryError(
                f"{text[:40]!r}...: a category of depth {d}, deeper than the limit of {MAX_DEPTH} "
                "(structseq.data.categories.MAX_DEPTH)"
            )
        return tree
    except RecursionError:
        raise CategoryError(f"{text[:40]!r}...: nested too deeply") from None


def _parse_grail(s: str, i: int) -> tuple[Tree, int]:
    m = re.compile(r"[^(),\s]+").match(s, i)
    if m is None:
        raise CategoryError(f"{s!r}: expected a name at {i}")
    name, i = m.group(), m.end()
    if i >= len(s) or s[i] != "(":
        return name, i  # an atom
    if name not in _GRAIL_BINARY and name not in _GRAIL_UNARY:
        raise CategoryError(f"{s!r}: unknown connective {name!r} (dr, dl, p, dia, box)")
    mm = re.compile(r"\((\w+),").match(s, i)
    if mm is None:
        raise CategoryError(f"{s!r}: expected '(mode,' after {name!r} at {i}")
    mode, i = mm.group(1), mm.end()
    left, i = _parse_grail(s, i)
    if name in _GRAIL_UNARY:
        right = BLANK
    else:
        if i >= len(s) or s[i] != ",":
            raise CategoryError(f"{s!r}: expected ',' at {i}")
        right, i = _parse_grail(s, i + 1)
    if i >= len(s) or s[i] != ")":
        raise CategoryError(f"{s!r}: expected ')' at {i}")
    sym = (_GRAIL_BINARY.get(name) or _GRAIL_UNARY[name]) + mode
    return (sym, left, right), i + 1


_CCG_TOKEN = re.compile(r"[()/\\]|[^()/\\]+")


def _parse_ccg(s: str) -> Tree:
    tokens = _CCG_TOKEN.findall(s)
    pos = 0

    def expr() -> Tree:  # operand ((slash) operand)*, left-associative
        nonlocal pos
        tree = operand()
        while pos < len(tokens) and tokens[pos] in ("/", "\\"):
            slash = tokens[pos]
            pos += 1
            tree = (slash, tree, operand())
        return tree

    def operand() -> Tree:
        nonlocal pos
        if pos >= len(tokens):
            raise CategoryError(f"{s!r}: unexpected end")
        tok = tokens[pos]
        pos += 1
        if tok == "(":
            tree = expr()
            if pos >= len(tokens) or tokens[pos] != ")":
                raise CategoryError(f"{s!r}: unbalanced parentheses")
            pos += 1
            return tree
        if tok in (")", "/", "\\") or tok != tok.strip():
            raise CategoryError(f"{s!r}: unexpected {tok!r}")
        return tok

    tree = expr()
    if pos != len(tokens):
        raise CategoryError(f"{s!r}: trailing {''.join(tokens[pos:])!r}")
    return tree


# ---------------------------------------------------------------- printing


def print_category(tree: Tree) -> str:
    """The string of a tree, in the notation its connectives belong to."""
    if isinstance(tree, str):
        return tree
    sym, left, right = tree
    m = _MODED.match(sym)
    if m is not None:  # Grail
        name = _GRAIL_NAME[m.group(1)]
        if m.group(1) in ("<>", "[]"):
            return f"{name}({m.group(2)},{print_category(left)})"
        return f"{name}({m.group(2)},{print_category(left)},{print_category(right)})"
    if sym not in ("/", "\\"):
        raise CategoryError(f"{sym!r} is not a connective")
    return f"{_ccg_operand(left)}{sym}{_ccg_operand(right)}"


def _ccg_operand(tree: Tree) -> str:
    return tree if isinstance(tree, str) else f"({print_category(tree)})"


def canonical(text: str) -> str:
    """The canonical spelling of a category string (e.g. CCG bare slashes fully bracketed)."""
    return print_category(parse_category(text))


# ---------------------------------------------------------------- positions


def nodes(tree: Tree) -> list[tuple[int, str]]:
    """(position, symbol) of every node, breadth-first (root 1; children of k at 2k, 2k+1)."""
    out, level = [], [(1, tree)]
    while level:
        nxt = []
        for k, t in level:
            if isinstance(t, str):
                out.append((k, t))
            else:
                out.append((k, t[0]))
                nxt += [(2 * k, t[1]), (2 * k + 1, t[2])]
        level = nxt
    return out


def depth(tree: Tree) -> int:
    """0 for an atom."""
    return 0 if isinstance(tree, str) else 1 + max(depth(tree[1]), depth(tree[2]))


def well_formed(tree: Tree) -> bool:
    """Arity respected: BLANK exactly in the right slot of unary modalities, connectives never leaves."""
    if isinstance(tree, str):
        return tree != BLANK and not is_binary(tree)
    sym, left, right = tree
    if not is_binary(sym):
        return False
    if is_unary(sym):
        return right == BLANK and well_formed(left)
    return well_formed(left) and well_formed(right)


def from_nodes(symbols: Mapping[int, str], k: int = 1) -> Tree | None:
    """The tree of a {position: symbol} map (None when a binary symbol lacks a child or an atom has one)."""
    sym = symbols.get(k)
    if sym is None:
        return None
    if not is_binary(sym):
        return sym
    left, right = from_nodes(symbols, 2 * k), from_nodes(symbols, 2 * k + 1)
    if left is None or right is None:
        return None
    return (sym, left, right)


def symbols_of(trees: Iterable[Tree]) -> set[str]:
    return {s for t in trees for _, s in nodes(t)}
