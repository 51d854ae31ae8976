"""Data: readers report file and line, registry, vocabularies, batching."""

import pytest

from structseq.data.batching import collate, make_batches
from structseq.data.dataset import DATASETS, register_dataset
from structseq.data.example import Example
from structseq.data.readers import read_file, read_parallel, read_tsv
from structseq.data.registry import SplitSpec, datasets, holdout, load_dataset
from structseq.data.vocab import Vocab
from structseq.errors import DataError


def test_tsv_reader_maps_named_columns(tmp_path):
    f = tmp_path / "d.tsv"
    f.write_text("a b\tx y\tcat1\tn1\nc\tz\tcat2\tn2\n")
    ex = read_tsv(f, columns=("source", "target", "category", "note"))
    assert ex[0] == Example(("a", "b"), ("x", "y"), "cat1")
    assert [e.category for e in ex] == ["cat1", "cat2"]
    assert [e.meta["note"] for e in ex] == ["n1", "n2"]


def test_tsv_header_line_names_the_columns(tmp_path):
    f = tmp_path / "d.tsv"
    f.write_text("context\tsource\ttarget\nthe dog\ta b\tx y\n")
    (ex,) = read_tsv(f)
    assert ex.context == ("the", "dog") and ex.source == ("a", "b") and ex.target == ("x", "y")


def test_third_tsv_column_is_never_silently_kept(tmp_path):
    f = tmp_path / "d.tsv"
    f.write_text("a\tb\nc\td\te\n")
    with pytest.raises(DataError, match="d.tsv:2: 3 column.*header line"):
        read_tsv(f)


@pytest.mark.parametrize(
    "content, line, problem",
    [
        ("a\tb\nno tab here\n", 2, "expected 'source<TAB>target'"),
        ("a\tb\n\tb\n", 2, "empty source"),
        ("a\tb\nc\tb\nd\t  \n", 3, "empty target"),
    ],
)
def test_tsv_errors_name_file_and_line(tmp_path, content, line, problem):
    f = tmp_path / "bad.tsv"
    f.write_text(content)
    with pytest.raises(DataError, match=f"bad.tsv:{line}: {problem}"):
        read_tsv(f)


def test_scan_format_errors_name_file_and_line(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_text("IN: jump OUT: I_JUMP\nIN: walk I_WALK\n")
    with pytest.raises(DataError, match="bad.txt:2: .*OUT:"):
        read_file(f)


def test_parallel_files(tmp_path):
    (tmp_path / "a.src").write_text("a b\nc\n")
    (tmp_path / "a.tgt").write_text("x\ny z\n")
    ex = read_file(f"{tmp_path / 'a.src'},{tmp_path / 'a.tgt'}")
    assert [e.target for e in ex] == [("x",), ("y", "z")]
    (tmp_path / "b.tgt").write_text("x\n")
    with pytest.raises(DataError, match="2 lines but .*b.tgt has 1"):
        read_parallel(tmp_path / "a.src", tmp_path / "b.tgt")
    (tmp_path / "c.tgt").write_text("x\n\n")
    with pytest.raises(DataError, match="c.tgt:2: empty target"):
        read_parallel(tmp_path / "a.src", tmp_path / "c.tgt")


def test_missing_files_say_what_and_where(tmp_path):
    with pytest.raises(DataError, match=r"missing file .*cogs/train.tsv for cogs/train.*STRUCTSEQ_DATA"):
        load_dataset("cogs", "train", tmp_path)
    with pytest.raises(DataError, match="has no split 'train'.*no train set"):
        load_dataset("cognition", "train", tmp_path)
    with pytest.raises(DataError, match="unknown dataset 'nope'; known: .*scan-jump"):
        load_dataset("nope")


def test_embedded_datasets_need_no_files(tmp_path):
    assert len(load_dataset("scan-jump", "test", tmp_path)) == 7706
    assert len(load_dataset("colors", "train", tmp_path)) == 14


def test_a_dataset_registered_at_its_loader_reads_by_name_and_name_split(tmp_path):
    """A plugin dataset is one decorated loader: `load_dataset`, NAME:SPLIT and SplitSpec all find it."""
    seen = []

    @register_dataset("toy-plugin", description="two toy pairs", splits=("train", "test"), source="generated")
    def _toy(split, root):
        seen.append((split, root))
        return [Example(("a",), ("A",), split), Example(("b",), ("B",), split)]

    try:
        assert datasets()["toy-plugin"].source == "generated"
        assert [e.category for e in load_dataset("toy-plugin", "test", tmp_path)] == ["test", "test"]
        assert load_dataset("toy-plugin:train", data_root=tmp_path)[0].category == "train"
        assert seen == [("test", tmp_path), ("train", tmp_path)]
        with pytest.raises(DataError, match="dataset 'toy-plugin' has no split 'dev'"):
            load_dataset("toy-plugin", "dev", tmp_path)
        with pytest.raises(Exception, match="dataset 'toy-plugin' is registered twice"):
            register_dataset("toy-plugin", description="again", splits=("train",))(_toy)
    finally:
        DATASETS.remove("toy-plugin")
    assert "toy-plugin" not in datasets()


def test_split_spec_is_one_rule_for_split_strings(tmp_path, monkeypatch):
    """NAME:SPLIT of a registered dataset wins; then a file (anything with `data.dataset: files`, else what
    looks like a path); else a split of the configured dataset. An existing file with a colon stays a file."""
    assert SplitSpec.parse("cognition:cg-test", "cogs") == SplitSpec("cognition", "cg-test", "named")
    assert SplitSpec.parse("cognition:cg-test", "files") == SplitSpec("cognition", "cg-test", "named")
    assert SplitSpec.parse("gen", "cogs") == SplitSpec("cogs", "gen", "split")
    assert SplitSpec.parse("gen", "files") == SplitSpec("files", "gen", "file")
    for spec in ("a.tsv", "dir/x", "a.src,a.tgt", "x.jsonl", "y.txt.gz"):
        assert SplitSpec.parse(spec, "cogs").kind == "file"
    assert SplitSpec.parse("nosuch:test", "cogs").kind == "split"
    assert SplitSpec.parse("colors:test").load() == load_dataset("colors", "test")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "colors:test").write_text("a\tb\n")
    assert SplitSpec.parse("colors:test", "cogs") == SplitSpec("cogs", "colors:test", "file")
    assert [e.target for e in SplitSpec.parse("colors:test", "cogs").load()] == [("b",)]


def test_registry_lists_the_required_datasets():
    names = set(datasets())
    for name in (
        "colors",
        "scan-simple",
        "scan-length",
        "scan-jump",
        "scan-around-right",
        "cogs",
        "tatoeba-en-zh",
        "cognition",
        "react",
    ):
        assert name in names


def test_real_splits_have_published_sizes(shared_data):
    assert len(load_dataset("cogs", "gen", shared_data)) == 21000
    gen = load_dataset("cogs", "gen", shared_data)
    assert len({e.category for e in gen}) == 21
    assert len(load_dataset("cognition", "cg-test", shared_data)) == 10800
    assert len(load_dataset("react", "cg-test", shared_data)) == 3000
    assert len(load_dataset("tatoeba-en-zh", "test", shared_data)) == 2402


def test_vocab_is_deterministic_and_round_trips():
    v = Vocab.build([["b", "a", "b"], ["c"]])
    assert v.itos[4:] == ["b", "a", "c"]
    assert Vocab(v.to_list()) == v
    assert v.decode(v.encode(["a", "zzz"]) + [v.eos, 5]) == ["a", "<unk>"]


def test_holdout_is_seeded_and_disjoint():
    ex = [Example.from_text(str(i), "x") for i in range(100)]
    a1, h1 = holdout(ex, 0.1, seed=3)
    a2, h2 = holdout(ex, 0.1, seed=3)
    assert h1 == h2 and len(h1) == 10 and len(a1) == 90
    assert not set(map(id, a1)) & set(map(id, h1))


def test_token_budget_batches_cover_everything_once():
    src = [3, 10, 5, 7, 2, 9, 4, 4, 12, 1] * 10
    tgt = [4, 8, 6, 7, 3, 9, 5, 2, 11, 2] * 10
    batches = make_batches(src, tgt, max_tokens=40, seed=1)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(100))
    for b in batches:
        assert len(b) * max(max(src[i], tgt[i]) + 1 for i in b) <= 40 or len(b) == 1
    assert make_batches(src, tgt, max_tokens=40, seed=1) == batches
    assert make_batches(src, tgt, max_tokens=40, seed=2) != batches
    assert all(len(b) <= 8 for b in make_batches(src, tgt, max_tokens=10_000, batch_size=8))


def test_collate_adds_markers():
    v = Vocab.build([["a", "b"]])
    b = collate([Example(("a", "b"), ("b",)), Example(("a",), ("a", "b"))], [0, 1], v, v)
    assert b.src.tolist() == [[v.stoi["a"], v.stoi["b"], v.eos], [v.stoi["a"], v.eos, v.pad]]
    assert b.tgt_in.tolist() == [[v.bos, v.stoi["b"], v.pad], [v.bos, v.stoi["a"], v.stoi["b"]]]
    assert b.tgt_out.tolist() == [[v.stoi["b"], v.eos, v.pad], [v.stoi["a"], v.stoi["b"], v.eos]]
    assert b.num_target_tokens == 5


def test_batches_without_length_grouping_are_a_fresh_permutation_cut_in_order():
    """optim.group_by_length false: a DataLoader with shuffle=True (reference: a plain permutation in chunks)."""
    import numpy as np

    lens = [3, 10, 5, 7, 2, 9, 4, 4, 12, 1] * 3
    batches = make_batches(lens, lens, batch_size=4, max_tokens=None, seed=5, group_by_length=False)
    perm = np.random.default_rng(5).permutation(30).tolist()
    assert batches == [perm[i : i + 4] for i in range(0, 30, 4)]  # the short last batch kept
    assert make_batches(lens, lens, batch_size=4, max_tokens=None, seed=6, group_by_length=False) != batches
    capped = make_batches(lens, lens, batch_size=8, max_tokens=40, seed=5, group_by_length=False)
    assert [i for b in capped for i in b] == perm  # still in the permutation's order
    assert all(len(b) * max(lens[i] + 1 for i in b) <= 40 or len(b) == 1 for b in capped)
