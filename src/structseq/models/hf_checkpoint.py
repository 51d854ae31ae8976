"""Local Hugging Face encoder-decoder checkpoints, as the pretrained archs (`hf-seq2seq`, `rdangle-pretrained`)
and the `hf-seq2seq` task read them.

A checkpoint is only ever a local folder (model + tokenizer, as `save_pretrained` writes them), loaded with
`local_files_only=True`: a hub name, a missing folder, a folder without `config.json`, an encoder-only model
or a tokenizer without a pad, end or decoder-start token is a one-line ConfigError naming `model.pretrained`;
nothing is downloaded. transformers is imported only when a checkpoint is loaded (the registry imports this
module with every other model module).

`base_digest(folder)` fingerprints what a fine-tuned run depends on (config, weights, tokenizer files) so that
a run refuses a base folder that changed since training. `RowCache` gives the model's own key/value cache
(a transformers `Cache` object) the `map_rows` method through which `structseq.state.map_state` reorders
decoder states for beam search.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structseq.errors import ConfigError, StructseqError

KEY = "model.pretrained"
#: files that define a checkpoint besides its weights (what `base_digest` reads)
DEFINING = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "source.spm",
    "target.spm",
)
WEIGHTS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json")
WHOLE = 16 << 20  # files up to this size are hashed whole; larger ones by size, first and last MiB
PART = 1 << 20


def checkpoint_folder(path: str | None, key: str = KEY) -> Path:
    """The folder of a local checkpoint, or a one-line ConfigError (nothing is downloaded)."""
    if not path:
        raise ConfigError(
            f"'{key}' is required: the path of a local Hugging Face checkpoint folder (model + "
            "tokenizer, as save_pretrained writes them); nothing is downloaded"
        )
    folder = Path(path).expanduser()
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist (moved, deleted, or a hub name?)"
        raise ConfigError(
            f"'{key}': {str(path)!r} {what}; give a local folder holding the model and its tokenizer "
            "(as save_pretrained writes them): nothing is downloaded"
        )
    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"'{key}': {str(folder)!r} is not a Hugging Face checkpoint (no config.json); give the "
            "folder save_pretrained wrote"
        )
    return folder


def _transformers(key: str):
    try:
        import transformers
    except ImportError:
        raise ConfigError(f"'{key}' needs the transformers package: pip install 'structseq[hf]'") from None
    transformers.utils.logging.disable_progress_bar()
    return transformers


def _load(loader, folder: Path, what: str, key: str):
    try:
        return loader.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except StructseqError:
        raise
    except Exception as e:  # a broken folder: OSError, ValueError, safetensors errors...
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise ConfigError(
            f"'{key}': cannot load the {what} from {str(folder)!r} ({type(e).__name__}: {first}); nothing is downloaded"
        ) from None


def load_config(path: str | None, key: str = KEY):
    """The checkpoint's transformers config; an encoder-only model is a ConfigError."""
    folder = checkpoint_folder(path, key)
    config = _load(_transformers(key).AutoConfig, folder, "config", key)
    if not getattr(config, "is_encoder_decoder", False):
        raise ConfigError(
            f"'{key}': {str(folder)!r} holds a {config.model_type} model, which is encoder-only "
            "(config.is_encoder_decoder is false); give an encoder-decoder checkpoint (BART, mBART, "
            "T5, Marian, ...)"
        )
    return config


def load_seq2seq(path: str | None, key: str = KEY):
    """`AutoModelForSeq2SeqLM` of a local folder (local files only)."""
    load_config(path, key)
    return _load(_transformers(key).AutoModelForSeq2SeqLM, checkpoint_folder(path, key), "model", key)


#: files that hold a tokenizer's pieces (without one, transformers builds an empty tokenizer for some families)
VOCABULARY = ("tokenizer.json", "vocab.json", "vocab.txt", "merges.txt", "*.model", "*.spm", "vocab.*")


def load_tokenizer(path: str | None, key: str = KEY):
    """`AutoTokenizer` of a local folder (local files only). A folder holding no tokenizer vocabulary file is
    refused: transformers would build an empty tokenizer for it (T5), reading every word as unknown."""
    folder = checkpoint_folder(path, key)
    if not any(p.is_file() for pattern in VOCABULARY for p in folder.glob(pattern)):
        raise ConfigError(
            f"'{key}': {str(folder)!r} holds no tokenizer vocabulary ({', '.join(VOCABULARY[:4])}, a "
            "sentencepiece .model, ...); save the checkpoint's tokenizer there too (tokenizer.save_pretrained)"
        )
    return _load(_transformers(key).AutoTokenizer, folder, "tokenizer", key)


def load_generation_config(path: str | None, key: str = KEY):
    """The checkpoint's generation config as `generate` reads it: `generation_config.json`, else the one derived
    from the model config."""
    folder = checkpoint_folder(path, key)
    loader = _transformers(key).GenerationConfig
    if (folder / "generation_config.json").is_file():
        return _load(loader, folder, "generation config", key)
    return loader.from_model_config(load_config(path, key))


# ---------------------------------------------------------------- special tokens


@dataclass(frozen=True)
class SpecialIds:
    """The ids structseq needs: padding, the end of a sequence, the decoder's first input; and whether the
    checkpoint's generation config forces eos at the length limit (`forced_eos_token_id`)."""

    pad: int
    eos: int
    start: int
    eos_at_limit: bool = True


def special_ids(path: str | None, key: str = KEY) -> SpecialIds:
    """pad and eos from the tokenizer, the decoder start by the model's own rule from labels to decoder inputs
    (`structseq.models.hf_targets`); any missing (or a tokenizer that disagrees with the model about pad or eos,
    or a generation config that starts the decoder elsewhere) is a ConfigError naming it."""
    from structseq.models.hf_targets import check_generation_start, decoder_start

    config, tokenizer = load_config(path, key), load_tokenizer(path, key)
    where = f"'{key}': the checkpoint in {str(path)!r}"
    for name in ("pad", "eos"):
        if getattr(tokenizer, f"{name}_token_id", None) is None:
            raise ConfigError(
                f"{where}: its tokenizer has no {name} token ({name}_token); structseq needs pad, eos "
                "and a decoder start token (set it and save_pretrained again)"
            )
    pad, eos = int(tokenizer.pad_token_id), int(tokenizer.eos_token_id)
    for name, mine in (("pad", pad), ("eos", eos)):
        own = getattr(config, f"{name}_token_id", None)
        if own is not None and int(own) != mine:
            raise ConfigError(f"{where}: the tokenizer's {name} id {mine} is not the model's ({own})")
    if pad == eos:
        raise ConfigError(f"{where}: pad and eos are the same id ({pad}); structseq needs them apart")
    size, pieces = getattr(config, "vocab_size", None), len(tokenizer)
    if size and pieces > size:
        raise ConfigError(
            f"{where}: its tokenizer has {pieces} pieces but the model only {size} embeddings (vocab_size); "
            "a piece beyond them cannot be embedded: save the tokenizer the model was trained with"
        )
    generation = load_generation_config(path, key)
    start = decoder_start(config, tokenizer, eos, where)
    check_generation_start(start, generation, tokenizer, where)
    forced = generation.forced_eos_token_id
    forced = forced if isinstance(forced, (list, tuple)) else [forced]
    return SpecialIds(pad, eos, start, eos_at_limit=eos in forced)


# ---------------------------------------------------------------- the base folder's fingerprint


def _feed_file(h, path: Path) -> None:
    size = path.stat().st_size
    h.update(f"{path.name}:{size}:".encode())
    with open(path, "rb") as f:
        if size <= WHOLE:
            for chunk in iter(lambda: f.read(PART), b""):
                h.update(chunk)
        else:
            h.update(f.read(PART))
            f.seek(size - PART)
            h.update(f.read(PART))


def base_files(folder: Path) -> list[Path]:
    """The files a fine-tuned run depends on: config, weights, tokenizer (sorted by name)."""
    found = {p for name in DEFINING if (p := folder / name).is_file()}
    found |= {p for pattern in WEIGHTS for p in folder.glob(pattern) if p.is_file()}
    return sorted(found, key=lambda p: p.name)


def base_digest(path: str | Path) -> str:
    """sha256 over the base folder's config, tokenizer and weight files: each by name and size, and its bytes
    (whole up to 16 MiB, else the first and last MiB)."""
    h = hashlib.sha256()
    for p in base_files(Path(path).expanduser()):
        _feed_file(h, p)
    return h.hexdigest()


# ---------------------------------------------------------------- the model's own key/value cache


def cache_keyword(model) -> str:
    """The name under which this transformers version passes and returns the cache (`cache` in 5.x,
    `past_key_values` before)."""
    names = inspect.signature(model.forward).parameters
    return "cache" if "cache" in names else "past_key_values"


def output_cache(output) -> Any:
    """The cache a transformers model output returns (`cache` in 5.x, `past_key_values` before)."""
    fields = getattr(output, "__dataclass_fields__", {})
    return getattr(output, "cache" if "cache" in fields else "past_key_values", None)


def _map_layers(cache, fn):
    """A copy of a transformers `DynamicCache` with `fn` applied to every layer's keys and values."""
    new = copy.copy(cache)
    if hasattr(cache, "layers"):  # transformers >= 4.56
        new.layers = []
        for layer in cache.layers:
            layer = copy.copy(layer)
            if getattr(layer, "keys", None) is not None and layer.keys.numel():
                layer.keys, layer.values = fn(layer.keys), fn(layer.values)
            new.layers.append(layer)
    elif hasattr(cache, "key_cache"):  # transformers 4.4x-4.55
        new.key_cache = [fn(k) if k.numel() else k for k in cache.key_cache]
        new.value_cache = [fn(v) if v.numel() else v for v in cache.value_cache]
    else:
        raise TypeError(f"cannot reorder a {type(cache).__name__} (no layers / key_cache)")
    return new


def map_cache(cache, fn):
    """`fn` (a selection of batch rows) applied to a transformers cache: an `EncoderDecoderCache` of two
    dynamic caches, a dynamic cache, or legacy tuples."""
    if cache is None:
        return None
    if hasattr(cache, "shape"):
        return fn(cache)
    if isinstance(cache, (tuple, list)):
        return type(cache)(map_cache(c, fn) for c in cache)
    if hasattr(cache, "self_attention_cache"):
        return type(cache)(_map_layers(cache.self_attention_cache, fn), _map_layers(cache.cross_attention_cache, fn))
    return _map_layers(cache, fn)


class RowCache:
    """A decoder state entry holding the model's own cache; `map_state` reorders it through `map_rows`."""

    __slots__ = ("cache",)

    def __init__(self, cache):
        self.cache = cache

    def map_rows(self, fn, owned: bool = False) -> RowCache:
        return RowCache(map_cache(self.cache, fn))
