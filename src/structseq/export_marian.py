"""A from-scratch Transformer as a Hugging Face folder that stock transformers loads: `MarianMTModel`.

Why Marian. structseq's Transformer (`arch: transformer`, its defaults) is the Vaswani et al. / fairseq layer:
post-norm residual blocks (LayerNorm after each residual sum, eps 1e-5, no final stack norm), ReLU feed-forward,
q/k/v/out projections with biases and 1/sqrt(d_head) scaling, token embeddings scaled by sqrt(d_model) plus
static sinusoidal positions counted from 0, no LayerNorm on the embeddings, and an output layer with a bias.
`MarianMTModel` is exactly that layer (`scale_embedding: true`, `activation_function: relu`, separate source
and target vocabularies with `share_encoder_decoder_embeddings: false`, the output bias as
`final_logits_bias`). BART and mBART add a LayerNorm on the embeddings (`layernorm_embedding`) that no weights
turn into the identity, and BART's positions are learned with an offset of 2; FSMT and M2M100 count sinusoidal
positions from the padding index + 1. One difference remains: Marian computes its sinusoids with the
frequencies 10000^(-2i/d) where structseq (as fairseq) uses 10000^(-i/(d/2 - 1)), so the export writes
structseq's own table as `embed_positions.weight` (Marian loads a table the file holds and computes its own only
when the file has none). Ties are written out (every weight its own tensor; `tie_word_embeddings: false`), so
the folder needs nothing but stock transformers (`trust_remote_code=False`).

What Marian cannot hold is refused in one line naming why (`marian_blockers`): relative positions, pre-norm
layers, a copy or lexical head, `head.mask_special`. An arch opts in by the capability `marian-layout`
(`register_arch(..., capabilities=(MARIAN_LAYOUT,))`): its config has the Transformer's keys and its model
the Transformer's modules. Dangle, R-Dangle, the LSTM and context models declare no such layout.

Tokenizer: structseq's tokens are the data's own (whitespace-split words or the run's subword pieces), so the
folder holds the vocabularies as `vocab-src.json` / `vocab-tgt.json` ({token: id}) and a README saying how to
encode (tokens, then </s>; unknown -> <unk>) and decode.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from structseq.data.vocab import Vocab
from structseq.errors import StructseqError
from structseq.outputs import atomic_write
from structseq.registry import MARIAN_LAYOUT

#: the capability an arch declares when its model is the Transformer's layout (`marian_blockers` checks its config)
CAPABILITY = MARIAN_LAYOUT  # the capability an arch declares (`structseq.registry`)


def marian_blockers(model_config) -> list[str]:
    """Why a model of this config (a Transformer's schema: the arch declares `CAPABILITY`) is not a Marian model
    (empty: it is one)."""
    why = []
    if model_config.positions != "sinusoidal":
        why.append("relative positions (Marian's attention has no relative-position terms)")
    if model_config.norm_first:
        why.append("pre-norm layers (Marian's layers normalise after each residual sum)")
    head = model_config.head
    if head.type != "softmax":
        why.append(f"a {head.type} head (Marian's output is one linear layer)")
    elif head.mask_special:
        why.append("head.mask_special (a renormalisation without <pad>, <s>, <unk> that Marian's output lacks)")
    return why


def _config(run, n_positions: int) -> dict:
    m, d = run.config.model, run.config.decode
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        "vocab_size": len(run.vocabs["src"]),
        "decoder_vocab_size": len(run.vocabs["tgt"]),
        "share_encoder_decoder_embeddings": False,
        "tie_word_embeddings": False,
        "d_model": m.d_model,
        "encoder_layers": m.encoder_layers,
        "decoder_layers": m.decoder_layers,
        "encoder_attention_heads": m.n_heads,
        "decoder_attention_heads": m.n_heads,
        "encoder_ffn_dim": m.ffn_dim,
        "decoder_ffn_dim": m.ffn_dim,
        "activation_function": "relu",
        "dropout": m.dropout,
        "attention_dropout": m.attention_dropout,
        "activation_dropout": m.activation_dropout,
        "encoder_layerdrop": 0.0,
        "decoder_layerdrop": 0.0,
        "max_position_embeddings": n_positions,
        "scale_embedding": True,
        "pad_token_id": Vocab.pad,
        "bos_token_id": Vocab.bos,
        "eos_token_id": Vocab.eos,
        "decoder_start_token_id": Vocab.bos,
        "forced_eos_token_id": None,
        "is_encoder_decoder": True,
        "_structseq_decode": {"max_len_a": d.max_len_a, "max_len_b": d.max_len_b},
    }


def _generation_config(run, n_positions: int) -> dict:
    """structseq's search as generate's settings: its beam, length penalty and stopping rule; <pad> and a second
    <s> never generated. The limit a * |x| + b has no per-input form here: `max_length` is the position table."""
    d = run.config.decode
    return {
        "decoder_start_token_id": Vocab.bos,
        "bos_token_id": Vocab.bos,
        "eos_token_id": Vocab.eos,
        "pad_token_id": Vocab.pad,
        "num_beams": d.beam,
        "length_penalty": d.len_penalty,
        "early_stopping": d.early_stopping,
        "suppress_tokens": [Vocab.pad, Vocab.bos],
        "max_length": n_positions,
        "do_sample": False,
    }


def _attention(prefix: str, attn) -> dict:
    return {
        f"{prefix}.{name}.{p}": getattr(getattr(attn, name), p)
        for name in ("q_proj", "k_proj", "v_proj", "out_proj")
        for p in ("weight", "bias")
    }


def _norm(prefix: str, residual) -> dict:
    return {f"{prefix}.weight": residual.norm.weight, f"{prefix}.bias": residual.norm.bias}


def _ffn(prefix: str, ffn) -> dict:
    return {f"{prefix}.{fc}.{p}": getattr(getattr(ffn, fc), p) for fc in ("fc1", "fc2") for p in ("weight", "bias")}


def marian_state(model, n_positions: int) -> dict[str, torch.Tensor]:
    """The Transformer's weights under MarianMTModel's names, each its own contiguous tensor."""
    from structseq.nn.layers import sinusoidal_table

    enc, dec = model.encoder, model.decoder
    d_model = enc.embed.embed.weight.shape[1]
    table = sinusoidal_table(n_positions, d_model)
    out = {
        "model.encoder.embed_tokens.weight": enc.embed.embed.weight,
        "model.decoder.embed_tokens.weight": dec.embed.embed.weight,
        "model.encoder.embed_positions.weight": table,
        "model.decoder.embed_positions.weight": table,
    }
    for i, layer in enumerate(enc.layers):
        p = f"model.encoder.layers.{i}"
        out.update(_attention(f"{p}.self_attn", layer.self_attn))
        out.update(_norm(f"{p}.self_attn_layer_norm", layer.attn_block))
        out.update(_ffn(p, layer.ffn))
        out.update(_norm(f"{p}.final_layer_norm", layer.ffn_block))
    for i, layer in enumerate(dec.layers):
        p = f"model.decoder.layers.{i}"
        out.update(_attention(f"{p}.self_attn", layer.self_attn))
        out.update(_norm(f"{p}.self_attn_layer_norm", layer.self_block))
        out.update(_attention(f"{p}.encoder_attn", layer.cross_attn["source"]))
        out.update(_norm(f"{p}.encoder_attn_layer_norm", layer.cross_block["source"]))
        out.update(_ffn(p, layer.ffn))
        out.update(_norm(f"{p}.final_layer_norm", layer.ffn_block))
    proj = model.head.proj
    out["lm_head.weight"] = proj.weight
    out["final_logits_bias"] = (proj.bias if proj.bias is not None else torch.zeros(proj.out_features))[None]
    return {k: v.detach().to("cpu", torch.float32).clone().contiguous() for k, v in out.items()}


README = """# A structseq Transformer as a transformers MarianMTModel

Exported by `structseq export` from {run} (checkpoint {checkpoint}). Stock transformers loads it:

```python
import json, torch
from transformers import AutoModelForSeq2SeqLM

model = AutoModelForSeq2SeqLM.from_pretrained("DIR")  # MarianMTModel; trust_remote_code is not needed
src = json.load(open("DIR/vocab-src.json"))            # token -> id
tgt = {{i: t for t, i in json.load(open("DIR/vocab-tgt.json")).items()}}
ids = torch.tensor([[src.get(t, {unk}) for t in "your tokenised input".split()] + [{eos}]])  # tokens, then </s>
out = model.generate(ids, attention_mask=ids.ne({pad}))
print(" ".join(tgt[i] for i in out[0].tolist() if i > {unk}))  # drops <pad> <s> </s> <unk>
```

Inputs are the run's own tokens (whitespace-split words, or its subword pieces), then </s> (id {eos}), and
<s> (id {bos}) first when the run's config sets `task.source_bos`; padding is id {pad}. `generation_config.json` holds the run's beam, length penalty and stopping rule;
structseq's length limit a * |x| + b (here a = {a}, b = {b}) has no per-input setting in `generate`: pass
`max_new_tokens`. `structseq.api.load_run("DIR")` reads the same folder as a structseq run.
"""


def write_marian(run, out: Path, record: dict) -> dict:
    """The transformers files of the run `run` (a Transformer layout, `marian_blockers` empty) into `out`:
    config.json, generation_config.json, model.safetensors, vocab-src.json, vocab-tgt.json, README.md."""
    from safetensors.torch import save_file

    blockers = marian_blockers(run.config.model)
    if blockers:
        raise StructseqError(f"{record['run']}: not a transformers Marian model: {'; '.join(blockers)}")
    n_positions = run.config.model.max_length + 2
    save_file(marian_state(run.model, n_positions), str(out / "model.safetensors"), metadata={"format": "pt"})
    atomic_write(out / "config.json", json.dumps(_config(run, n_positions), indent=1) + "\n")
    atomic_write(out / "generation_config.json", json.dumps(_generation_config(run, n_positions), indent=1) + "\n")
    for side in ("src", "tgt"):
        vocab = run.vocabs[side]
        atomic_write(out / f"vocab-{side}.json", json.dumps(dict(vocab.stoi), ensure_ascii=False, indent=0) + "\n")
    d = run.config.decode
    text = README.format(
        run=record["run"],
        checkpoint=record["checkpoint"],
        unk=Vocab.unk,
        eos=Vocab.eos,
        pad=Vocab.pad,
        bos=Vocab.bos,
        a=d.max_len_a,
        b=d.max_len_b,
    )
    atomic_write(out / "README.md", text)
    return {"class": "MarianMTModel", "positions": n_positions}
