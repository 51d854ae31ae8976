"""What several benchmarks measure alike: the fairseq-sized Transformer they train and compare
(`benchmarks/bench_train.py`, `bench_compile.py`, `bench_gpu.py`, `profile_train_step.py`,
`bench_decode_fairseq.py`), the FLOPs of one update for model FLOP utilisation, the machine's matmul
throughput (its denominator), and a model whose </s> never wins, so that every setting decodes the same
number of tokens. One copy here instead of benchmarks importing each other (issue 46).

Imports torch only inside the functions that use it.
"""

from __future__ import annotations

import statistics
import time

#: fairseq 0.12's `transformer_iwslt_de_en` in structseq's terms (d 512, FFN 1024, 4 heads, 6+6 layers)
FAIRSEQ_TRANSFORMER = {
    "arch": "transformer",
    "d_model": 512,
    "n_heads": 4,
    "ffn_dim": 1024,
    "encoder_layers": 6,
    "decoder_layers": 6,
    "dropout": 0.3,
    "norm_first": False,
    "positions": "sinusoidal",
}
#: fairseq's recipe for it: AdamW (0.9, 0.98), inverse square root schedule, label smoothing 0.1, no clipping
FAIRSEQ_OPTIM = {
    "optimizer": "adamw",
    "betas": [0.9, 0.98],
    "eps": 1e-8,
    "lr": 5e-4,
    "schedule": "inverse_sqrt",
    "warmup": 4000,
    "weight_decay": 1e-4,
    "label_smoothing": 0.1,
    "clip_norm": 0.0,
}


def bench_config(dataset: str, valid: str, model: dict, optim: dict, seed: int = 1) -> dict:
    """A config (as `config_from_dict` takes it) that trains without end and never validates. An explicit
    validation split keeps every training example, so batch plans index the whole file."""
    return {
        "data": {"dataset": dataset, "valid": valid},
        "model": dict(model),  # copies: a caller may change its config, never these constants
        "optim": dict(optim),
        "train": {"seed": seed, "max_steps": 10**6, "valid_every": 0},
    }


def fairseq_transformer_config(max_tokens: int = 3500) -> dict:
    """The fairseq comparison's setting: `FAIRSEQ_TRANSFORMER` on SCAN simple batches of `max_tokens`."""
    return bench_config("scan-simple", "test", FAIRSEQ_TRANSFORMER, {**FAIRSEQ_OPTIM, "max_tokens": max_tokens})


def matmul_gflops(threads: int, n: int = 2048, reps: int = 10) -> dict:
    """fp32 GEMM throughput of this process with `threads` threads (n x n by n x n, best and median of
    `reps`): the denominator of model FLOP utilisation, measured beside the model it divides."""
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return {
        "n": n,
        "threads": threads,
        "gflops_best": 2 * n**3 / min(times) / 1e9,
        "gflops_median": 2 * n**3 / statistics.median(times) / 1e9,
    }


def count_flops(trainer) -> tuple[int, int, float]:
    """FLOPs of one forward+backward of the trainer's next batch (not applied to the parameters; the run's
    position does not move), its target tokens (MFU scales the FLOPs per target token by the measured
    tokens/s, so a long or short counted batch does not skew it), and the share of that batch's source and
    target-input positions that are not padding (what an unpadded implementation computes on; it scales
    every per-position FLOP, so MFU x share is MFU counted over non-padding tokens, exact for the linear
    layers and an upper bound for attention's quadratic terms). FlopCounterMode has no formula for
    `nn.LSTM`'s fused kernel, so an LSTM encoder's FLOPs are not counted: a lower bound there."""
    from dataclasses import replace

    from torch.utils.flop_counter import FlopCounterMode

    from structseq.data.vocab import Vocab

    b = trainer.batches.next(replace(trainer.progress), trainer.dist)  # a copy: the run's position stays
    with FlopCounterMode(display=False) as counter:
        loss, _, _ = trainer.task.loss(trainer.model, b, 0.1)  # any task (seq2seq: label-smoothed NLL)
        loss.backward()
    trainer.optimizer.zero_grad(set_to_none=True)
    ids = [b[k] for k in ("src", "tgt_in") if k in b]
    share = sum(int(t.ne(Vocab.pad).sum()) for t in ids) / sum(t.numel() for t in ids) if ids else 1.0
    return int(counter.get_total_flops()), int(b.num_tokens), share


class NoEos:
    """A decoding model (encode / init_state / step) whose </s> (`eos`) scores -1e4 at every step, so search
    ends only at its length limit: untrained weights would stop at arbitrary lengths, and a benchmark
    wants the same work from every setting."""

    def __init__(self, model, eos: int | None = None):
        from structseq.data.vocab import Vocab

        self.model, self.eos = model, Vocab.eos if eos is None else eos

    def encode(self, inputs):
        return self.model.encode(inputs)

    def init_state(self, enc):
        return self.model.init_state(enc)

    def step(self, prev, state):
        lp, state = self.model.step(prev, state)
        lp = lp.clone()
        lp[:, self.eos] = -1e4
        return lp, state
