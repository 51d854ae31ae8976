"""Issue 12, a standing guard: random and adversarial input to the readers, the YAML/config loader and
prediction either works or raises the toolkit's own error (a `StructseqError`) naming where; nothing else
escapes.

CI runs a small, derandomised profile (seconds); the long profile runs on demand with fresh random
examples: `STRUCTSEQ_FUZZ=long pytest tests/test_fuzz.py` (2000 examples per property).
"""

from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structseq.compose.corpus import read_sentences
from structseq.compose.corpus import read_tsv as read_table
from structseq.data.limits import length_limit
from structseq.data.readers import read_file, read_parallel, read_tsv
from structseq.data.scan import read_scan_file
from structseq.errors import StructseqError
from structseq.textio import stdin_lines
from structseq.yamlio import load_yaml

LONG = os.environ.get("STRUCTSEQ_FUZZ") == "long"
FUZZ = settings(max_examples=2000 if LONG else 60, deadline=None, derandomize=not LONG,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

RESERVED = ["</s>", "<unk>", "<pad>", "<s>"]
token = st.one_of(st.sampled_from(["dax", "RED", "IN:", "OUT:", "\t", "jump", *RESERVED]),
                  st.text(min_size=1, max_size=8))
line = st.one_of(st.lists(token, max_size=12).map(" ".join), st.just(""), st.just(" ".join(["w"] * 3000)),
                 st.sampled_from(["IN: jump OUT: I_JUMP", "source\ttarget\tcategory", "a\tb\tc\td", "\ufeffa\tb"]))
text_lines = st.lists(line, max_size=8).map(lambda ls: "\n".join(ls))
raw_bytes = st.one_of(
    st.binary(max_size=300),
    text_lines.map(lambda t: t.encode("utf-8")),
    text_lines.map(lambda t: t.encode("utf-16")),
    text_lines.map(lambda t: t.encode("latin-1", errors="replace")),
    st.tuples(text_lines, st.binary(max_size=4), text_lines).map(lambda p: p[0].encode() + p[1] + p[2].encode()),
)


def _located(error: StructseqError, *names: str) -> None:
    """The message names one of the files (or, for a config, the file)."""
    assert any(n in str(error) for n in names), f"no location in: {error}"


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    if name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


@FUZZ
@given(data=raw_bytes, name=st.sampled_from(["t.tsv", "t.tsv.gz", "scan.txt", "plain.txt"]),
       limit=st.sampled_from([None, 5]))
def test_single_file_readers_fail_only_with_located_errors(data, name, limit):
    with tempfile.TemporaryDirectory() as d:
        path = _write(Path(d), name, data)
        for reader in (read_tsv, read_file, read_scan_file, read_sentences, read_table):
            try:
                with length_limit(limit):
                    out = reader(path)
            except StructseqError as e:
                _located(e, name)
                continue
            if reader in (read_tsv, read_file, read_scan_file):
                for e in out:  # what a reader accepts never holds a reserved token or a BOM
                    assert not set(RESERVED) & set(e.source + e.target)
                    assert not any("\ufeff" == t[:1] for t in e.source[:1])


@FUZZ
@given(src=raw_bytes, tgt=raw_bytes)
def test_parallel_reader_fails_only_with_located_errors(src, tgt):
    with tempfile.TemporaryDirectory() as d:
        a, b = _write(Path(d), "a.src", src), _write(Path(d), "b.tgt", tgt)
        try:
            read_parallel(a, b)
        except StructseqError as e:
            _located(e, "a.src", "b.tgt")


@FUZZ
@given(data=raw_bytes)
def test_stdin_fails_only_with_located_errors(data):
    import io

    try:
        list(stdin_lines(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")))
    except StructseqError as e:
        _located(e, "<stdin>")


yaml_text = st.one_of(
    st.text(max_size=200),
    st.lists(st.sampled_from(["optim:", "  lr: 1e-3", "  lr: 2", "train:", "  max_steps: 0", "data: [", "a: *x",
                              "&x b: 1", "- 1", "? [1]", ": 2", "model: {arch: lstm}", "  beam: -1", "\t"]),
             max_size=10).map("\n".join),
)


@FUZZ
@given(text=yaml_text)
def test_yaml_loader_fails_only_with_located_errors(text):
    try:
        load_yaml(text, "c.yaml")
    except StructseqError as e:
        _located(e, "c.yaml")
