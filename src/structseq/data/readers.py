"""Readers for the generic formats: TSV with named columns, JSON Lines with a field mapping and line-aligned
parallel files."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from structseq.data.example import Example
from structseq.data.limits import admit
from structseq.errors import DataError
from structseq.textio import first_line, iter_lines, open_checked


def _checked(path, n, columns: dict[str, str], required: Sequence[str] = ("source", "target")) -> Example:
    for name in required:
        if not columns.get(name, "").strip():
            raise DataError(f"empty {name}", path, n)
    return Example.from_columns(columns)


DEFAULT_COLUMNS = ("source", "target")


def read_tsv(path: str | Path, columns: Sequence[str] | None = None) -> list[Example]:
    """Tab-separated examples whose columns are named: by `columns` (e.g. `("source", "target", "category")`),
    else by a header line naming them (`source<TAB>target<TAB>category`), else `source<TAB>target`.

    Names are the `Example` fields (source, target, context, category); any other name is kept in
    `Example.meta`, and `-` drops a column. A line with more columns than names is an error, never
    silently something."""
    examples = []
    names: tuple[str, ...] | None = tuple(columns) if columns is not None else None
    first = True
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if first and names is not None and tuple(cols) == names:
            first = False
            continue  # a header line naming exactly the configured columns
        if first and names is not None and _is_header(cols):
            raise DataError(
                f"a header line ({', '.join(cols)}) that differs from data.columns ({', '.join(names)}); "
                "make them agree (or remove the header line)",
                path,
                n,
            )
        first = False
        if names is None:
            names = DEFAULT_COLUMNS
            if _is_header(cols):
                names = tuple(cols)  # a header line
                continue
        if len(cols) != len(names):
            if len(names) == 2 and len(cols) < 2:
                raise DataError(f"expected 'source<TAB>target', found {len(cols)} column(s)", path, n)
            raise DataError(
                f"{len(cols)} column(s) but {len(names)} named ({', '.join(names)}); name every "
                "column with a header line (e.g. 'source<TAB>target<TAB>category') or data.columns",
                path,
                n,
            )
        row = {k: v for k, v in zip(names, cols) if k != "-"}
        admit(examples, _checked(path, n, row, [k for k in ("source", "target") if k in names]), n, path)
    return examples


def _is_header(cells: list[str]) -> bool:
    """`source` plus another field name, every cell an identifier, none repeated."""
    from structseq.data.example import FIELDS

    names = set(cells)
    return (
        "source" in names
        and len(names & set(FIELDS)) >= 2
        and len(names) == len(cells)
        and all(c == "-" or c.isidentifier() for c in cells)
    )


#: JSON Lines keys without `data.fields`: the example fields themselves (source and target required)
JSONL_REQUIRED, JSONL_OPTIONAL = ("source", "target"), ("context", "category")


def _jsonl_value(value, key: str, path, n: int) -> str:
    """A JSON value as an example's text: a string, or a list of strings (tokens)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return " ".join(value)
    raise DataError(
        f"key {key!r} holds {type(value).__name__} {json.dumps(value)[:60]}; expected a string or a list of strings",
        path,
        n,
    )


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list) -> dict:
    """A JSON object's pairs as a dict; a key given twice (which json.loads would keep the last of) is refused."""
    seen = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen.add(key)
    return dict(pairs)


def _jsonl_object(line: str, path, n: int) -> dict:
    try:
        obj = json.loads(line, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as e:
        raise DataError(f"not valid JSON ({e.msg}, column {e.colno})", path, n) from None
    except _DuplicateKey as e:
        raise DataError(f"key {e.args[0]!r} given twice in one object", path, n) from None
    except RecursionError:
        raise DataError("JSON nested too deeply to read", path, n) from None
    if not isinstance(obj, dict):
        raise DataError(f"expected a JSON object per line, found {type(obj).__name__}", path, n)
    return obj


def read_jsonl(path: str | Path, fields: Mapping[str, str] | None = None) -> list[Example]:
    """One JSON object per line. `fields` maps each example field to the key it reads (`data.fields`, e.g.
    `{source: utterance, target: plan}`; a name that is not an `Example` field goes to `Example.meta`); without
    it, the keys are the field names (source and target, optionally context and category); `-` names keys to
    drop (`{-: "id,notes"}`), as a TSV's `-` column. A key the mapping does not name (nor drops), a mapped key missing from a line, an empty source or target, a value that is not a string
    (or a list of strings), or a line that is not a JSON object is a DataError naming the file and line."""
    mapping = dict(fields) if fields is not None else None
    dropped = set(filter(None, (mapping or {}).pop("-", "").split(",")))  # `-: id,notes`, as a TSV's `-` column
    examples = []
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        obj = _jsonl_object(line, path, n)
        if mapping is None:
            wanted = {k: k for k in JSONL_REQUIRED + tuple(k for k in JSONL_OPTIONAL if k in obj)}
            hint = "; name them with data.fields (e.g. {source: utterance, target: plan}); '-': KEY,... drops keys"
        else:
            wanted = mapping
            hint = f" (data.fields reads {', '.join(mapping.values())}); '-': KEY,... in data.fields drops keys"
        unknown = [k for k in obj if k not in wanted.values() and k not in dropped]
        if unknown:
            raise DataError(f"unknown key {unknown[0]!r}{hint}", path, n)
        missing = [k for k in wanted.values() if k not in obj]
        if missing:
            raise DataError(f"missing key {missing[0]!r}{hint}", path, n)
        row = {name: _jsonl_value(obj[key], key, path, n) for name, key in wanted.items()}
        admit(examples, _checked(path, n, row, [k for k in ("source", "target") if k in row]), n, path)
    return examples


def read_parallel(
    source_path: str | Path, target_path: str | Path, meta: Mapping[str, str | Path] | None = None
) -> list[Example]:
    """Two line-aligned files; `meta` names further line-aligned files whose lines land in `Example.meta`."""
    src = [line for _, line in iter_lines(source_path)]
    tgt = [line for _, line in iter_lines(target_path)]
    if len(src) != len(tgt):
        raise DataError(f"{len(src)} lines but {target_path} has {len(tgt)}", source_path)
    extra = {}
    for name, extra_path in (meta or {}).items():
        extra[name] = [line for _, line in iter_lines(extra_path)]
        if len(extra[name]) != len(src):
            raise DataError(f"{len(extra[name])} lines but {source_path} has {len(src)}", extra_path)
    out = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        if not s.strip():
            raise DataError("empty source", source_path, i + 1)
        if not t.strip():
            raise DataError("empty target", target_path, i + 1)
        admit(out, Example.from_text(s, t, meta={k: v[i] for k, v in extra.items()}), i + 1, source_path, target_path)
    return out


def is_jsonl(spec: str | Path) -> bool:
    """A JSON Lines file by its name: `.jsonl` (or `.jsonl.gz`)."""
    return str(spec).endswith((".jsonl", ".jsonl.gz"))


def read_file(
    spec: str | Path, columns: Sequence[str] | None = None, fields: Mapping[str, str] | None = None
) -> list[Example]:
    """A user-given file: `a.tsv` (named columns, see `read_tsv`), `a.jsonl` (JSON Lines; `fields` maps the
    example fields to its keys, see `read_jsonl`), a SCAN `IN: ... OUT: ...` file,
    `SRC_FILE,TGT_FILE` (line-aligned; documents when they hold `<d>` markers: `SRC_FILE,TGT_FILE,N` gives each
    sentence the N previous source sentences of its document as context, 2 by default), or a supertagged corpus
    (`word|category` tokens or CCGbank `.auto`, see `data.tlgbank`)."""
    spec = str(spec)
    if "," in spec and not Path(spec).exists():
        src, tgt, *rest = spec.split(",")
        with open_checked(src) as f:
            documents = f.readline().strip() == "<d>"
        if rest and not documents:
            raise DataError(
                f"'{spec}': a third field (previous sentences of context) needs document files that "
                "start with a '<d>' marker",
                src,
            )
        if len(rest) > 1 or (rest and not rest[0].isdigit()):
            raise DataError(f"'{spec}': expected SRC_FILE,TGT_FILE or SRC_FILE,TGT_FILE,N (N previous sentences)")
        if documents:
            from structseq.data.documents import read_documents

            return read_documents(src, tgt, int(rest[0]) if rest else 2)
        return read_parallel(src, tgt)
    if is_jsonl(spec):
        return read_jsonl(spec, fields)
    first = first_line(spec)
    if first.startswith("IN: "):
        from structseq.data.scan import read_scan_file

        return read_scan_file(spec)
    from structseq.data.tlgbank import read_supertag_file, sniff

    if sniff(first) is not None:  # supertagged text (word|category ...) or CCGbank .auto
        return read_supertag_file(spec)
    return read_tsv(spec, columns)
