"""`structseq export RUN -o DIR`: a trained run as a folder that stands on its own.

- `hf-seq2seq` runs: a Hugging Face folder (the fine-tuned weights in safetensors, the config, the generation
  config and the tokenizer), which `AutoModelForSeq2SeqLM.from_pretrained(DIR)` and
  `AutoTokenizer.from_pretrained(DIR)` load with the log-probabilities structseq computes;
- a from-scratch Transformer whose layers `MarianMTModel` holds (the arch declares the capability
  `marian-layout`; post-norm, sinusoidal positions, a softmax head: `structseq.export_marian` says why Marian):
  the structseq folder below plus the transformers files (config.json, generation_config.json,
  model.safetensors, vocab-src.json / vocab-tgt.json and a README), so both `structseq.api.load_run(DIR)`
  and `AutoModelForSeq2SeqLM.from_pretrained(DIR)` read it; `--format transformers` refuses, in one line
  naming why, a model Marian cannot hold (relative positions, pre-norm, a copy or lexical head, an arch
  without that layout: Dangle, the LSTM); `--format structseq` leaves the transformers files out;
- every other arch: a structseq folder that `structseq.api.load_run(DIR)` reads (and `structseq evaluate` /
  `predict`): `config.yaml`, `checkpoints/{best|last}.pt` holding only what loading needs (weights,
  vocabularies, config, task state, progress: no optimiser or RNG state, so it cannot be resumed) and each
  vocabulary as `vocab/NAME.txt`, one token a line. An `rdangle-pretrained` run's folder still reads its base
  checkpoint folder (tokenizer and backbone config, at the path and with the content hash its config and
  task state record).
Both write `structseq-export.json`: the run, the checkpoint, the arch and, for pretrained archs, the base.

Safe with a stranger's run: a vocabulary name from the checkpoint becomes a file name only when it is a plain
name (`plain_name`; `../../victim` or an absolute path is refused), and the folder is built beside `DIR` under
a temporary name and renamed into place when whole, so a full disk or a kill never leaves a half-written `DIR`
(nor anything inside `DIR` that blocks a retry).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from pathlib import Path

from structseq.errors import StructseqError
from structseq.outputs import _umask, atomic_write, plain_name
from structseq.registry import ARCHS, HF_EXPORT
from structseq.run.checkpoint import RUN_KEYS, load_checkpoint, resolve_checkpoint, save_checkpoint
from structseq.run.layout import check_directory, checkpoint_file
from structseq.run.saved_config import read_run_config, write_config

#: what an exported structseq checkpoint keeps
KEEP = ("model", "vocab", "config", "task", "progress")


def _out_folder(out_dir: str | Path) -> Path:
    """`out_dir`, checked to be absent or an empty folder (temporaries `.*.tmp` a killed export left there
    are removed)."""
    out = Path(out_dir)
    if out.is_dir():
        for p in out.glob(".*.tmp"):
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise StructseqError(f"{out}: exists and is not an empty folder; export writes a new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    return out


def _write_failed(error: Exception, out: Path) -> StructseqError:
    """A failed write (a full disk, a file size limit), also where torch or safetensors report it as their own
    error, as one line naming the export's folder."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    return StructseqError(
        f"{out}: the export could not be written ({type(error).__name__}: {first}); is the disk full or a "
        "file size limit (ulimit -f) reached? Nothing was left in its place"
    )


def _checkpoint_name(run_dir: Path, checkpoint: str | None) -> tuple[str, Path]:
    if checkpoint is None:
        section = read_run_config(run_dir).get("train") or {}
        checkpoint = section.get("eval_checkpoint", "best") if isinstance(section, dict) else "best"
    return resolve_checkpoint(run_dir, checkpoint)


#: `--format`: auto (a structseq folder, with the transformers files where a stock class holds the model),
#: structseq (only the structseq folder), transformers (the transformers files required: refused otherwise)
FORMATS = ("auto", "structseq", "transformers")


def export_run(run_dir: str | Path, out_dir: str | Path, checkpoint: str | None = None, fmt: str = "auto") -> dict:
    """Export checkpoint `checkpoint` (default: the run's `train.eval_checkpoint`) of `run_dir` to the new folder
    `out_dir`; returns what `structseq-export.json` records (`format`: `huggingface` or `structseq`; for a
    structseq folder `transformers`: the stock class that loads it too, or None and `not_transformers`: why)."""
    from structseq.export_marian import CAPABILITY, marian_blockers

    if fmt not in FORMATS:
        raise StructseqError(f"--format: unknown {fmt!r}; choices: {', '.join(FORMATS)}")
    run_dir = Path(run_dir)
    check_directory(run_dir)
    name, path = _checkpoint_name(run_dir, checkpoint)
    ckpt = load_checkpoint(path, RUN_KEYS)
    model = ckpt["config"].get("model") or {}
    arch = model.get("arch") if isinstance(model, dict) else None
    record = {"run": str(run_dir), "checkpoint": name, "arch": arch, "step": ckpt["progress"].get("step")}
    if isinstance(model, dict) and model.get("pretrained"):
        record.update(base=model["pretrained"], base_sha256=(ckpt.get("task") or {}).get("base_sha256"))
    for vocab in ckpt["vocab"]:
        plain_name(vocab, f"{path}: a vocabulary name")
    capabilities = ARCHS.get(arch).capabilities if arch in ARCHS else frozenset()
    marian = None
    if HF_EXPORT not in capabilities and fmt != "structseq":
        from structseq.config import config_from_dict

        why = (
            marian_blockers(config_from_dict(dict(ckpt["config"]), saved=True).model)
            if CAPABILITY in capabilities
            else [f"arch {arch} declares no layout a stock transformers class holds (capability {CAPABILITY})"]
        )
        if not why and importlib.util.find_spec("safetensors") is None:  # an optional dependency (the hf extra)
            why = ["the safetensors package is not installed (pip install 'structseq[hf]')"]
        if why and fmt == "transformers":
            raise StructseqError(f"{run_dir}: --format transformers: no transformers class holds it: {'; '.join(why)}")
        marian, record["not_transformers"] = not why, why or None
    out = _out_folder(out_dir)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        if arch in ARCHS and HF_EXPORT in ARCHS.get(arch).capabilities:
            _export_huggingface(run_dir, name, tmp)
            record["format"] = "huggingface"
        else:
            _export_structseq(ckpt, name, tmp)
            record["format"] = "structseq"
            record["transformers"] = _export_marian(run_dir, name, tmp, record) if marian else None
        atomic_write(tmp / "structseq-export.json", json.dumps(record, indent=1) + "\n")
        os.chmod(tmp, 0o777 & ~_umask())  # as mkdir would create it (mkdtemp's are private)
        os.replace(tmp, out)  # onto an absent or empty folder
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, (OSError, RuntimeError)) or type(e).__name__ == "SafetensorError":  # safetensors' own
            raise _write_failed(e, out) from None
        raise
    return record


def _export_huggingface(run_dir: Path, name: str, out: Path) -> None:
    """The fine-tuned backbone and the run's tokenizer, as save_pretrained writes them."""
    from structseq.api import load_run

    run = load_run(run_dir, name, device="cpu")
    run.model.save_pretrained(out)
    run.task.tokenizer.save_pretrained(str(out))


def _export_marian(run_dir: Path, name: str, out: Path, record: dict) -> dict:
    """The transformers files beside the structseq ones (`structseq.export_marian`)."""
    from structseq.api import load_run
    from structseq.export_marian import write_marian

    return write_marian(load_run(run_dir, name, device="cpu"), out, record)


def _export_structseq(ckpt: dict, name: str, out: Path) -> None:
    save_checkpoint({k: ckpt[k] for k in KEEP if k in ckpt}, checkpoint_file(out, name))
    write_config(out, dict(ckpt["config"]))
    for vocab, tokens in ckpt["vocab"].items():
        atomic_write(out / "vocab" / f"{vocab}.txt", "".join(f"{t}\n" for t in tokens))
