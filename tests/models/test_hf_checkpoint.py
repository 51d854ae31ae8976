"""What `models.hf_checkpoint` promises: only a local folder with a config.json is a checkpoint (each other case
a one-line error naming model.pretrained), encoder-only models and tokenizers without distinct pad and eos or
disagreeing with the model are refused, the base fingerprint covers config, tokenizer and weights (by name and
bytes; a large file by its size and ends) and nothing else, and a reordered cache moves keys and values alike.
Tiny random checkpoints built offline (structseq.testing.hf_tiny)."""

import json

import pytest
import torch

pytest.importorskip("transformers")

from structseq.errors import ConfigError  # noqa: E402
from structseq.models import hf_checkpoint as hc  # noqa: E402
from structseq.testing.hf_tiny import tiny_bart, tiny_bert  # noqa: E402


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    return tiny_bart(tmp_path_factory.mktemp("bart") / "bart")


def test_only_a_local_folder_with_a_config_is_a_checkpoint(tmp_path, bart):
    assert hc.checkpoint_folder(str(bart)) == bart
    with pytest.raises(ConfigError, match="'model.pretrained' is required"):
        hc.checkpoint_folder("")
    with pytest.raises(ConfigError, match="does not exist"):
        hc.checkpoint_folder("facebook/bart-base")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        hc.checkpoint_folder(str(tmp_path / "file"))
    with pytest.raises(ConfigError, match=r"'task.x': .* is not a Hugging Face checkpoint \(no config.json\)"):
        hc.checkpoint_folder(str(tmp_path), key="task.x")


def test_an_encoder_only_model_is_refused(tmp_path):
    folder = tiny_bert(tmp_path / "bert")
    with pytest.raises(ConfigError, match="encoder-only"):
        hc.load_config(str(folder))


def test_special_ids_and_their_checks(tmp_path, bart):
    assert hc.special_ids(str(bart)) == hc.SpecialIds(pad=1, eos=2, start=2)
    no_pad = tiny_bart(tmp_path / "nopad", drop=("pad",))
    with pytest.raises(ConfigError, match="its tokenizer has no pad token"):
        hc.special_ids(str(no_pad))
    same = tiny_bart(tmp_path / "same", pad_token_id=2)
    with pytest.raises(ConfigError, match=r"tokenizer's pad id 1 is not the model's \(2\)"):
        hc.special_ids(str(same))
    cfg = json.loads((bart / "config.json").read_text())
    cfg["eos_token_id"] = 3
    (tmp_path / "eos").mkdir()
    for p in bart.iterdir():
        (tmp_path / "eos" / p.name).write_bytes(p.read_bytes())
    (tmp_path / "eos" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=r"tokenizer's eos id 2 is not the model's \(3\)"):
        hc.special_ids(str(tmp_path / "eos"))


def test_pad_and_eos_must_differ(tmp_path, monkeypatch, bart):
    class Tok:
        pad_token_id = eos_token_id = 5

    monkeypatch.setattr(hc, "load_tokenizer", lambda path, key=hc.KEY: Tok())
    cfg = hc.load_config(str(bart))
    cfg.pad_token_id = cfg.eos_token_id = None
    monkeypatch.setattr(hc, "load_config", lambda path, key=hc.KEY: cfg)
    with pytest.raises(ConfigError, match=r"pad and eos are the same id \(5\)"):
        hc.special_ids(str(bart))


def _copy(src, dst):
    dst.mkdir()
    for p in src.iterdir():
        (dst / p.name).write_bytes(p.read_bytes())
    return dst


def test_the_base_fingerprint_covers_config_tokenizer_and_weights_only(tmp_path, bart):
    base = hc.base_digest(bart)
    copy = _copy(bart, tmp_path / "copy")
    assert hc.base_digest(copy) == base  # by content, not by where the folder is
    (copy / "README.md").write_text("notes")
    assert hc.base_digest(copy) == base
    for name in ("config.json", "tokenizer.json", "model.safetensors"):
        changed = _copy(bart, tmp_path / f"changed-{name}")
        data = bytearray((changed / name).read_bytes())
        data[-2] ^= 1
        (changed / name).write_bytes(bytes(data))
        assert hc.base_digest(changed) != base, name
    renamed = _copy(bart, tmp_path / "renamed")
    (renamed / "model.safetensors").rename(renamed / "other.safetensors")
    assert hc.base_digest(renamed) != base  # by name too


def test_a_large_file_is_fingerprinted_by_its_size_and_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(hc, "WHOLE", 64)
    monkeypatch.setattr(hc, "PART", 16)
    (tmp_path / "config.json").write_bytes(bytes(100))
    first = hc.base_digest(tmp_path)
    for where in (0, 99):
        data = bytearray(100)
        data[where] = 1
        (tmp_path / "config.json").write_bytes(bytes(data))
        assert hc.base_digest(tmp_path) != first
    data = bytearray(100)
    data[50] = 1  # the middle of a large file is not read
    (tmp_path / "config.json").write_bytes(bytes(data))
    assert hc.base_digest(tmp_path) == first


def test_a_reordered_cache_moves_keys_and_values_alike(bart):
    from transformers import AutoModelForSeq2SeqLM

    from structseq.models.hf_seq2seq import HFSeq2Seq

    hf = AutoModelForSeq2SeqLM.from_pretrained(str(bart)).eval()
    model = HFSeq2Seq(hf, hc.special_ids(str(bart)))
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 1], [10, 2, 1, 1]])
    prev = torch.tensor([4, 6, 8])
    with torch.no_grad():
        state = model.init_state(model.encode({"src": src}))
        _, state = model.step(prev, state)
        order = torch.tensor([2, 0, 1])
        moved = {
            k: (v.map_rows(lambda x: x.index_select(0, order)) if isinstance(v, hc.RowCache) else v)
            for k, v in state.items()
        }
        moved.update({k: state[k].index_select(0, order) for k in ("src", "src_mask", "memory")})
        lp_moved, _ = model.step(prev[order], moved)
        lp, _ = model.step(prev, state)
    assert torch.allclose(lp_moved, lp[order], atol=1e-5)
