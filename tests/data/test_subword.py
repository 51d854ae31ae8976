"""What `data.subword` promises: BPE pieces decode back to exactly the words (also unseen words over the
training alphabet, and a continuation piece at the start), reserved tokens pass through both kinds unsplit, a
model saved as text encodes the same, a tiny vocabulary size is refused, and a task state names its kind (checkpoints from before
the kind was saved hold BPE); an unreadable tokenizer is one error naming the key."""

import pytest

pytest.importorskip("tokenizers")

from structseq.data.subword import CONT, GivenTokenizer, Subword, from_state, load_tokenizer  # noqa: E402
from structseq.errors import ConfigError  # noqa: E402

KEEP = ("<sep>", "<brk>")
WORDS = "walked walking talked talking played playing jumps jumped runs".split()


@pytest.fixture(scope="module")
def bpe():
    return Subword.learn([WORDS * 3, WORDS[::-1] * 2, ["<brk>", "walks"]], 40, keep=KEEP)


def test_pieces_decode_to_exactly_the_words(bpe):
    for words in (tuple(WORDS), ("talks", "jumping", "walk", "lap"), ("runs", "<brk>", "played"), ("a",)):
        pieces = bpe.encode(words)
        assert bpe.decode(pieces) == words
    assert any(p.startswith(CONT) for p in bpe.encode(("walking",)))
    assert len(bpe.encode(("walking",))) < len("walking")  # learned merges, not characters


def test_decode_at_its_boundaries():
    assert Subword.decode(["##b", "c"]) == ("b", "c")  # a continuation at the start opens a word
    assert Subword.decode(["a", "##", "b"]) == ("a", "##", "b")  # the bare mark is a word of its own
    assert Subword.decode(["a", "##b", "##c", "d"]) == ("ab" + "c", "d")
    assert Subword.decode([]) == ()


def test_reserved_tokens_pass_through_unsplit(bpe):
    assert bpe.encode(("<brk>",)) == ("<brk>",) and bpe.encode(("<sep>", "walked"))[0] == "<sep>"
    assert "<brk>" not in bpe.tokenizer.get_vocab()  # kept out of the learned model
    given = GivenTokenizer.from_str(bpe.to_str(), keep=KEEP)
    pieces = given.encode(("walked", "<brk>", "<sep>", "talked"))
    assert pieces.count("<brk>") == 1 and pieces.count("<sep>") == 1
    out = given.decode(pieces)
    assert out[out.index("<brk>") + 1] == "<sep>" and out.count("<brk>") == 1


def test_a_model_saved_as_text_encodes_the_same(bpe):
    again = from_state({"subword": bpe.to_str(), "subword_kind": "bpe"}, keep=KEEP)
    assert isinstance(again, Subword) and again.encode(tuple(WORDS)) == bpe.encode(tuple(WORDS))
    legacy = from_state({"subword": bpe.to_str()}, keep=KEEP)  # before the kind was saved: BPE
    assert isinstance(legacy, Subword) and legacy.encode(("walked",)) == bpe.encode(("walked",))
    assert isinstance(from_state({"subword": bpe.to_str(), "subword_kind": "tokenizer"}), GivenTokenizer)
    assert from_state({}) is None and from_state({"subword": ""}) is None
    with pytest.raises(ConfigError, match="unknown kind 'sentencepiece'"):
        from_state({"subword": bpe.to_str(), "subword_kind": "sentencepiece"})


def test_vocabulary_size_limit_is_exact():
    Subword.learn([WORDS], 10)
    with pytest.raises(ConfigError, match="'task.subword_vocab_size' must be >= 10, got 9"):
        Subword.learn([WORDS], 9)


def test_an_unreadable_tokenizer_names_the_key(tmp_path, bpe):
    with pytest.raises(ConfigError, match="'task.tokenizer_path' is required"):
        load_tokenizer(None)
    with pytest.raises(ConfigError, match="does not exist"):
        load_tokenizer(str(tmp_path / "none.json"))
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"'k': cannot read a tokenizer from .*bad.json"):
        load_tokenizer(str(tmp_path / "bad.json"), key="k")
    (tmp_path / "good.json").write_text(bpe.to_str())
    assert load_tokenizer(str(tmp_path / "good.json")).to_str() == bpe.to_str()
