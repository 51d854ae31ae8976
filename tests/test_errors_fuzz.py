"""Issue 12, a standing guard: random and adversarial input to the readers, the YAML/config loader and
prediction either works or raises the toolkit's own error (a `StructseqError`) naming where; nothing else
escapes.

CI runs a small, derandomised profile (seconds); the long profile runs on demand with fresh random
examples: `STRUCTSEQ_FUZZ=long pytest tests/test_errors_fuzz.py` (2000 examples per property).
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
FUZZ = settings(
    max_examples=2000 if LONG else 60,
    deadline=None,
    derandomize=not LONG,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

RESERVED = ["</s>", "<unk>", "<pad>", "<s>"]
token = st.one_of(
    st.sampled_from(["dax", "RED", "IN:", "OUT:", "\t", "jump", *RESERVED]), st.text(min_size=1, max_size=8)
)
line = st.one_of(
    st.lists(token, max_size=12).map(" ".join),
    st.just(""),
    st.just(" ".join(["w"] * 3000)),
    st.sampled_from(["IN: jump OUT: I_JUMP", "source\ttarget\tcategory", "a\tb\tc\td", "\ufeffa\tb"]),
)
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
@given(
    data=raw_bytes,
    name=st.sampled_from(["t.tsv", "t.tsv.gz", "scan.txt", "plain.txt"]),
    limit=st.sampled_from([None, 5]),
)
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
    st.lists(
        st.sampled_from(
            [
                "optim:",
                "  lr: 1e-3",
                "  lr: 2",
                "train:",
                "  max_steps: 0",
                "data: [",
                "a: *x",
                "&x b: 1",
                "- 1",
                "? [1]",
                ": 2",
                "model: {arch: lstm}",
                "  beam: -1",
                "\t",
            ]
        ),
        max_size=10,
    ).map("\n".join),
)


@FUZZ
@given(text=yaml_text)
def test_yaml_loader_fails_only_with_located_errors(text):
    try:
        load_yaml(text, "c.yaml")
    except StructseqError as e:
        _located(e, "c.yaml")


# ---------------------------------------------------------------- the config loader and `--set` strings

value = st.one_of(
    st.integers(-3, 10**12),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=6),
    st.lists(st.floats(-2, 2), max_size=3),
    st.sampled_from(["lstm", "copy"]),
)
keys = st.sampled_from(
    [
        "optim.lr",
        "optim.accumulate",
        "optim.betas",
        "optim.max_tokens",
        "optim.batch_size",
        "train.max_steps",
        "train.patience",
        "train.valid_metric",
        "train.seed",
        "train.device",
        "decode.beam",
        "decode.max_len_b",
        "data.valid_fraction",
        "data.bleu_tokenize",
        "data.max_length",
        "model.arch",
        "model.dropout",
        "model.head.type",
        "model.head.tau",
        "task.type",
        "task",
        "optim",
        "nosuch.key",
    ]
)


def _yaml_value(v) -> str:
    import json

    return json.dumps(v) if not isinstance(v, float) or v == v and abs(v) != float("inf") else str(v)


config_text = st.one_of(
    yaml_text,
    st.lists(st.tuples(keys, value), max_size=6).map(
        lambda kv: "\n".join(
            f"{k.split('.')[0]}: {{{'.'.join(k.split('.')[1:]) or 'x'}: {_yaml_value(v)}}}" for k, v in kv
        )
    ),
)
override = st.one_of(
    st.text(max_size=30),
    st.tuples(keys, value).map(lambda kv: f"{kv[0]}={_yaml_value(kv[1])}"),
    st.tuples(st.text(max_size=12), st.text(max_size=12)).map("=".join),
)


@FUZZ
@given(text=config_text, data=raw_bytes, use_bytes=st.booleans(), overrides=st.lists(override, max_size=3))
def test_config_loader_fails_only_with_errors_naming_the_file(text, data, use_bytes, overrides):
    from structseq.config import load_config

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "c.yaml"
        path.write_bytes(data if use_bytes else text.encode("utf-8"))
        try:
            load_config(path, overrides)
        except StructseqError as e:
            _located(e, "c.yaml")


@FUZZ
@given(item=override)
def test_random_set_strings_fail_only_with_errors_naming_the_override_or_key(item):
    from structseq.config import apply_overrides, config_from_dict

    try:
        config_from_dict(apply_overrides({}, [item]))
    except StructseqError as e:
        key = item.split("=", 1)[0].strip().split(".")[0]
        assert "override" in str(e) or f"'{key}" in str(e), f"no location in: {e}"


# ---------------------------------------------------------------- predict


def _untrained_run():
    from structseq.api import Run
    from structseq.config import config_from_dict
    from structseq.data.vocab import Vocab
    from structseq.models import build_model
    from structseq.tasks import get_task

    cfg = config_from_dict(
        {
            "model": {"arch": "lstm", "embed_dim": 8, "hidden_dim": 8, "layers": 1},
            "data": {"max_length": 40},
            "decode": {"max_len_a": 0.0, "max_len_b": 4},
        }
    )
    vocabs = {"src": Vocab.build([["dax", "jump", "a"]]), "tgt": Vocab.build([["RED", "I_JUMP"]])}
    task = get_task(cfg)
    return Run(Path("."), cfg, build_model(cfg.model, vocabs).eval(), vocabs, "best", task)


RUN = None


@FUZZ
@given(data=raw_bytes, beam=st.sampled_from([None, 1, 2]))
def test_predict_fails_only_with_errors_naming_the_input_line(data, beam):
    import io

    global RUN
    RUN = RUN or _untrained_run()
    try:
        lines = list(stdin_lines(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")))
        out = RUN.predict(lines, beam=beam, where="<stdin>")
    except StructseqError as e:
        _located(e, "<stdin>")
        return
    assert len(out) == len(lines) and all("\n" not in o for o in out)
