"""What `data.limits` promises: a sequence of exactly the maximum length is admitted and one token more is
not (source, target and context each against its own limit); errors name the file, the line and the setting;
skipping counts `file:line` of the side that was too long; reserved tokens are refused as whole tokens only
(`<brk>` allowed inside a context); the limits of the innermost block apply and end with it; and
`input_limits` takes data.max_length over the model's, and no context limit when the task trims contexts."""

import pytest

from structseq.config import config_from_dict
from structseq.data.example import Example
from structseq.data.limits import MAX_LENGTH, RESERVED, admit, check_tokens, input_limits, length_limit
from structseq.errors import DataError


def _ex(n_src, n_tgt=1, n_ctx=None):
    return Example(("a",) * n_src, ("b",) * n_tgt, None, None if n_ctx is None else ("c",) * n_ctx)


@pytest.mark.parametrize("side, sizes", [("source", (4, 1, None)), ("target", (1, 4, None)), ("context", (1, 1, 6))])
def test_exactly_the_maximum_is_admitted_and_one_more_is_not(side, sizes):
    out = []
    at = {"source": (3, 1, None), "target": (1, 3, None), "context": (1, 1, 5)}[side]
    with length_limit(3, max_context=5):
        admit(out, _ex(*at), 1, "f.tsv")
        assert len(out) == 1
        with pytest.raises(DataError, match=rf"f.tsv:7.*{side} has {max(sizes[0], sizes[1], sizes[2] or 0)} tokens"):
            admit(out, _ex(*sizes), 7, "f.tsv")
    assert len(out) == 1


def test_errors_name_the_setting_and_the_target_file():
    with length_limit(2, length_key="model.max_length"):
        with pytest.raises(DataError, match=r"tgt.txt:4.*target has 3 tokens, more than the maximum length 2 "):
            admit([], _ex(1, 3), 4, "src.txt", "tgt.txt")
        with pytest.raises(DataError, match=r"\(model.max_length\)"):
            admit([], _ex(3, 1), 4, "src.txt", "tgt.txt")


def test_skipping_counts_each_skipped_line_of_the_long_side():
    out = []
    with length_limit(2, skip=True, max_context=2) as limit:
        for line, ex in enumerate([_ex(3), _ex(2, 2, 2), _ex(1, 3), _ex(1, 1, 3)], 1):
            admit(out, ex, line, "s.txt", "t.txt")
    assert len(out) == 1 and limit.skipped == ["s.txt:1", "t.txt:3", "s.txt:4"]


def test_the_innermost_block_applies_and_none_outside():
    out = []
    with length_limit(5):
        with length_limit(1):
            with pytest.raises(DataError):
                admit(out, _ex(2), 1, "f")
        admit(out, _ex(2), 2, "f")  # the outer limit again
    admit(out, _ex(MAX_LENGTH + 5), 3, "f")  # no block: no limit
    assert len(out) == 2


@pytest.mark.parametrize("token", sorted(RESERVED))
def test_reserved_tokens_are_refused_as_whole_tokens(token):
    with pytest.raises(DataError, match=rf"f.tsv:2.*reserved token '{token}' in the target"):
        admit([], Example(("a",), ("b", token)), 2, "f.tsv")
    check_tokens(("a" + token, token + "b"), "source", "f", 1)  # inside a longer token: ordinary text
    if token == "<brk>":
        check_tokens(("x", token, "y"), "context", "f", 1)
    else:
        with pytest.raises(DataError, match="in the context"):
            check_tokens(("x", token), "context", "f", 1)


def test_check_tokens_length_is_exact():
    check_tokens(("a",) * 4, "source", "f", 1, max_length=4)
    with pytest.raises(DataError, match=r"source has 5 tokens, more than the maximum length 4 \(k.x\)"):
        check_tokens(("a",) * 5, "source", "f", 1, max_length=4, key="k.x")


def _limits(data_max=None, model_max=None, ctx=None, trim=None):
    model = {"arch": "context-transformer" if ctx else "transformer", "max_length": model_max}
    cfg = {"data": {"max_length": data_max}, "model": {k: v for k, v in model.items() if v is not None}}
    if ctx:
        cfg["model"]["max_context_length"] = ctx
        cfg["data"]["dataset"] = "ctx-commands"
        cfg["task"] = {"type": "context-seq2seq", "max_context_tokens": trim}
    return input_limits(config_from_dict(cfg))


def test_input_limits_take_the_data_setting_first_then_the_model():
    assert _limits(7, 50)["max_length"] == 7 and _limits(7, 50)["length_key"] == "data.max_length"
    assert _limits(None, 50)["max_length"] == 50 and _limits(None, 50)["length_key"] == "model.max_length"
    assert _limits()["max_length"] == MAX_LENGTH
    assert _limits(ctx=300)["max_context"] == 300
    assert _limits(ctx=300, trim=20)["max_context"] is None  # trimmed to 20: nothing longer is read
