"""The pretrained archs with a user's mistakes and a changing machine (issue 43, sections 3-5): a relative base
folder is stored absolute, a moved one is pointed at with `--set model.pretrained=NEWDIR` (its content hash
still checked), and the checkpoint's own limits are clear errors or warnings, never an IndexError."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from structseq import api  # noqa: E402
from structseq.config import absolute_paths, config_from_dict  # noqa: E402
from structseq.fields import path_keys  # noqa: E402
from structseq.run.checkpoint import load_checkpoint  # noqa: E402
from structseq.testing.hf_tiny import tiny_bart  # noqa: E402
from tests.fixtures.cli_run import one_line_error, run_main  # noqa: E402
from tests.tasks.test_hf_seq2seq import train_config  # noqa: E402


def test_a_relative_base_folder_is_stored_absolute_and_a_moved_one_can_be_pointed_at(tmp_path, monkeypatch, capsys):
    """`model.pretrained: mybart` (relative) trained from one directory: on d15a89c stored as written, so
    `evaluate RUN` from elsewhere failed. Now the run holds the absolute path; after the folder moves,
    `--set model.pretrained=NEWDIR` finds it, and a folder of other content is still refused by its hash."""
    work = tmp_path / "work"
    tiny_bart(work / "mybart")
    monkeypatch.chdir(work)
    api.train(config_from_dict(train_config("mybart", 1)), "run", show_progress=False)
    capsys.readouterr()
    saved = load_checkpoint(work / "run" / "checkpoints" / "last.pt")["config"]["model"]["pretrained"]
    assert saved == str(work / "mybart")
    assert f"pretrained: {work / 'mybart'}" in (work / "run" / "config.yaml").read_text()
    monkeypatch.chdir(tmp_path)

    def evaluate(*extra):
        args = ("evaluate", work / "run", "--split", "train", "--limit", 2, "--threads", 1, *extra)
        return run_main(monkeypatch, capsys, *args)

    code, err = evaluate()
    assert code == 0, err
    (work / "mybart").rename(tmp_path / "moved")
    one_line_error(*evaluate(), "model.pretrained", "does not exist")
    code, err = evaluate("--set", "model.pretrained=moved")
    assert code == 0, err
    args = ("score", work / "run", "--pairs", "train", "--limit", 2, "--threads", 1, "--set", "model.pretrained=moved")
    code, err = run_main(monkeypatch, capsys, *args)
    assert code == 0, err
    tiny_bart(tmp_path / "other", seed=5)  # another base: the hash refuses it
    code, err = evaluate("--set", "model.pretrained=other")
    one_line_error(code, err, "changed since this run was trained")
    one_line_error(*evaluate("--set", "data.min_freq=3"), "--set data.min_freq=3", "model.pretrained")


def test_every_folder_a_run_keeps_reading_is_a_path_key():
    """The keys made absolute at training: the pretrained archs' base and the supertagger's encoder."""
    hf = config_from_dict({"task": "hf-seq2seq", "model": {"arch": "rdangle-pretrained", "pretrained": "b"}})
    assert path_keys(hf) == {"model.pretrained": "b"}
    tagger = config_from_dict({"task": "supertag", "model": {"arch": "supertag-tree", "encoder": {"pretrained": "e"}}})
    assert path_keys(tagger) == {"model.encoder.pretrained": "e"}
    absolute = absolute_paths(tagger)
    assert absolute.model.encoder.pretrained.startswith("/") and absolute.model.encoder.pretrained.endswith("/e")
    assert absolute_paths(absolute) is absolute  # already absolute: unchanged


def _model(folder, arch="hf-seq2seq", **decode):
    from structseq.models import build_model
    from structseq.tasks import get_task

    model = {"arch": arch, "pretrained": str(folder)}
    if arch == "rdangle-pretrained":
        model.update(fusion_layers=1, post_fusion_layers=1, interval=1)
    cfg = config_from_dict({"task": "hf-seq2seq", "model": model, "decode": decode})
    task = get_task(cfg)
    vocabs = task.build_vocabs([])
    return task, vocabs, build_model(cfg.model, vocabs, task="hf-seq2seq").eval()


def test_a_folder_without_tokenizer_files_is_refused(tmp_path):
    """A T5 folder without its tokenizer files: on d15a89c transformers built an empty tokenizer and every
    word read as <unk>; now a one-line ConfigError naming model.pretrained."""
    from structseq.errors import ConfigError
    from structseq.models.hf_checkpoint import load_tokenizer
    from structseq.testing.hf_tiny import tiny_t5

    folder = tiny_t5(tmp_path / "t5")
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / name).unlink(missing_ok=True)
    with pytest.raises(ConfigError, match=r"'model.pretrained': .* holds no tokenizer vocabulary"):
        load_tokenizer(str(folder))


def test_a_tokenizer_larger_than_the_embedding_table_is_refused(tmp_path):
    """More tokenizer pieces than `vocab_size`: on d15a89c an IndexError in the embedding at the first such
    piece; now a ConfigError naming both numbers."""
    from structseq.errors import ConfigError
    from structseq.testing.hf_tiny import colors_words

    words = colors_words()
    folder = tiny_bart(tmp_path / "bart", words, vocab_size=len(words))  # 5 specials more than embeddings
    with pytest.raises(ConfigError, match=rf"tokenizer has {len(words) + 5} pieces but the model only {len(words)}"):
        _model(folder)


@pytest.mark.parametrize("arch", ["hf-seq2seq", "rdangle-pretrained"])
def test_decoding_past_the_position_table_is_cut_there_with_a_warning(arch, tmp_path):
    """decode.max_len_b 512 on a BART of 16 positions: on d15a89c an IndexError (hf-seq2seq) or a ValueError
    traceback (rdangle-pretrained, fused input too long); now outputs are cut at the table's limit, with one
    warning naming both numbers. A random model rarely ends early, so the outputs reach the limit."""
    from structseq.data.example import Example

    folder = tiny_bart(tmp_path / "bart", max_position_embeddings=16, init_std=0.3)
    task, vocabs, model = _model(folder, arch, max_len_b=512, max_len_a=0.0, beam=2)
    examples = [Example.from_text("dax lug", "RED"), Example.from_text("zup wif kiki", "BLUE")]
    with pytest.warns(UserWarning, match=r"allows 512 output tokens, more than the model's position table holds"):
        out = task.predict(model, examples, vocabs)
    for e, o in zip(examples, out):  # rdangle: the fused input holds the source (with <s> </s>) too
        pieces = len(task.tokenizer(e.source_text)["input_ids"])
        assert len(o) <= (15 if arch == "hf-seq2seq" else 16 - pieces - 2)
    assert max(len(o) for o in out) >= 9  # the limit was reached (so the clamp was exercised)


def test_ensemble_members_differing_in_task_settings_are_refused(tmp_path):
    """Two runs alike but for task.source_bos: on d15a89c accepted, the first member's task encoding the input
    for both (scores depended on member order); now a ConfigError naming the key."""
    from structseq.api import load_ensemble
    from structseq.errors import ConfigError
    from structseq.train.loop import Trainer
    from tests.fixtures.toy import toy_config, toy_tsv

    data = toy_tsv(tmp_path)
    for name, bos in (("a", False), ("b", True)):
        cfg = toy_config(data, max_steps=1).to_dict()
        cfg["task"]["source_bos"] = bos
        Trainer(config_from_dict(cfg), tmp_path / name, show_progress=False).run()
    with pytest.raises(ConfigError, match=r"differ in task.source_bos \(.*a: False, .*b: True\)"):
        load_ensemble([tmp_path / "a", tmp_path / "b"])


def _skipped_in_training_refused_in_evaluation(tmp_path, monkeypatch, capsys, long_row, model, warning, refusal):
    """Train on a file whose line 3 is `long_row` (too_long: skip), expecting `warning` (it names d.tsv:3);
    then `evaluate` on the file and `predict` on stdin must each be the one-line error `refusal` (a pair: its
    message, and the stdin line 2 that makes it)."""
    folder = tiny_bart(tmp_path / "bart", max_position_embeddings=16)
    data = tmp_path / "d.tsv"
    data.write_text("\n".join(["dax lug\tRED BLUE", "zup\tYELLOW", long_row, "kiki fep\tBLUE"]) + "\n")
    cfg = train_config(folder, 1)
    cfg["model"].update(model)
    cfg["data"] = {"dataset": "files", "train": str(data), "valid": str(data), "test": [str(data)], "too_long": "skip"}
    # line 3 skipped from the training split and again from the validation split (the same file)
    with pytest.warns(UserWarning, match=warning + rf" \(first: {data}:3\)"):
        api.train(config_from_dict(cfg), tmp_path / "run", show_progress=False)
    capsys.readouterr()
    code, err = run_main(monkeypatch, capsys, "evaluate", tmp_path / "run", "--split", data, "--threads", 1)
    one_line_error(code, err, f"{data}:3: {refusal[0]}")
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO(f"dax\n{refusal[1]}\n"))
    code, err = run_main(monkeypatch, capsys, "predict", tmp_path / "run", "--threads", 1)
    return code, err


def test_over_long_inputs_are_skipped_in_training_and_refused_in_evaluation_naming_the_line(
    tmp_path, monkeypatch, capsys
):
    """A BART of 16 positions and a data file whose line 3 has 21 tokenizer pieces (well under the 1,024-token
    default): on d15a89c training stopped with a DataError naming neither file nor line; now training skips it
    with a warning naming file:line (as for every model), and evaluate / predict refuse it naming the line."""
    wifs = " ".join(["wif"] * 19)
    code, err = _skipped_in_training_refused_in_evaluation(
        tmp_path,
        monkeypatch,
        capsys,
        wifs + "\tGREEN",
        {},
        r"skipped 2 examples longer than .*16 tokenizer pieces",
        ("source has 21 tokenizer pieces, more than the maximum length 16", wifs),
    )
    one_line_error(code, err, "<stdin>:2: source has 21 tokenizer pieces")


def test_an_rdangle_fused_input_past_the_positions_is_skipped_in_training_and_refused_in_evaluation(
    tmp_path, monkeypatch, capsys
):
    """rdangle-pretrained on a BART of 16 positions; line 3's source (9 pieces) and target (8) fit each, but
    the fused input [source ; 8 decoder inputs ; end marker] needs 18 positions: on d15a89c a ValueError
    traceback, then (390a98f) a DataError that stopped training naming no line; now the readers count it (the
    arch's `fused_extra`), so training skips it with the warning naming file:3, evaluate refuses file:3, and
    predict refuses a source of 14 pieces (fits the positions alone, not with the shortest output <s> </s> and
    the end marker) naming <stdin>:2."""
    model = {"arch": "rdangle-pretrained", "fusion_layers": 1, "post_fusion_layers": 1, "interval": 1}
    code, err = _skipped_in_training_refused_in_evaluation(
        tmp_path,
        monkeypatch,
        capsys,
        "dax lug zup wif kiki fep dax\tRED BLUE GREEN YELLOW RED BLUE",
        model,
        r"skipped 2 examples .* or with a fused input past model.pretrained's max_position_embeddings 16",
        ("fused input (source + target) has 18 positions, more than the maximum length 16", " ".join(["wif"] * 12)),
    )
    one_line_error(code, err, "<stdin>:2: fused input (source + target) has 17 positions")


def test_the_rdangle_fused_measure_is_the_models_own_boundary_and_a_mixed_batch_fits(tmp_path):
    """The readers' count (`input_measure()["fused"]`) against the model itself (interval 1: a point at every
    step): an example counted 16 trains on 16 positions, one counted 17 is the model's DataError. A batch of
    a long source with a short target and a short source with a long target (14 each) trains: the short
    prefix's padding slots read position 0 (390a98f numbered them after the long source and raised)."""
    from structseq.data.example import Example
    from structseq.errors import DataError

    folder = tiny_bart(tmp_path / "bart", max_position_embeddings=16)
    task, vocabs, model = _model(folder, "rdangle-pretrained")
    fused = task.input_measure()["fused"]
    fits, past = (Example.from_text("dax lug zup wif kiki", " ".join(["RED"] * k)) for k in (6, 7))
    assert (fused(fits), fused(past)) == (16, 17)
    assert model(task.batch([fits], vocabs)).isfinite().all()
    with pytest.raises(DataError, match=r"the fused input .* needs 17 positions, more than the backbone's 16"):
        model(task.batch([past], vocabs))
    pair = [Example.from_text("dax lug zup wif kiki fep dax lug", "RED"), Example.from_text("dax", "RED BLUE " * 4)]
    assert [fused(e) for e in pair] == [14, 14]
    assert model(task.batch(pair, vocabs)).isfinite().all()
