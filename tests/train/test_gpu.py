"""GPU tests (`pytest -m gpu`): every architecture trains in fp32 and bf16, teacher-forced == incremental
scores, CPU == GPU decoding for the same weights, bit-exact resume on the GPU and loading on a CPU, torchrun
worlds, host-device synchronisations per update, and the peak memory of Dangle's recomputed chunks.

Every test runs on the device named by $STRUCTSEQ_TEST_DEVICE (default `cuda`) and is skipped, with the reason,
where that is CUDA and `torch.cuda.is_available()` is false. STRUCTSEQ_TEST_DEVICE=cpu runs the same tests on the
CPU, so that they cannot rot where no GPU is (tests/repo/test_gpu_smoke.py runs a subset in the default suite); the
CUDA-only measurements (synchronisations, peak memory) are not taken there.

    pytest -m gpu                                              # on a GPU machine
    STRUCTSEQ_TEST_DEVICE=cpu pytest -m gpu -k transformer     # the same code on the CPU
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
import random
import socket
import subprocess
import sys
import warnings
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import yaml

from structseq import api
from structseq.nn.attention import sdpa_without_cudnn
from structseq.train.loop import Trainer

# deterministic cuBLAS for the bit-exact resume test: read when the first cuBLAS handle is made, so set it here
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

pytestmark = pytest.mark.gpu
DEVICE = os.environ.get("STRUCTSEQ_TEST_DEVICE", "cuda")
ON_CUDA = DEVICE.startswith("cuda")


def architectures() -> dict[str, tuple[str, ...]]:
    """Every registered architecture -> the model keys its builder needs set beyond the defaults (`build_requires`,
    e.g. a local pretrained checkpoint); the one place that knows where the registry lives."""
    try:
        from structseq.registry import ARCHS
    except ImportError:
        from structseq.models.registry import ARCHS
    return {name: tuple(getattr(ARCHS[name].config, "build_requires", ())) for name in sorted(ARCHS)}


@pytest.fixture(scope="session")
def device() -> str:
    if ON_CUDA and not torch.cuda.is_available():
        pytest.skip(
            "needs a CUDA device: torch.cuda.is_available() is false (STRUCTSEQ_TEST_DEVICE=cpu runs the "
            "gpu tests on the CPU)"
        )
    return DEVICE


@pytest.fixture
def exact_fp32():
    """fp32 comparisons in true fp32: no TF32 in cuBLAS or cuDNN (cuDNN's LSTM uses TF32 by default)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


# ---------------------------------------------------------------- tiny configs of every architecture

BLOCKS = {"d_model": 32, "n_heads": 2, "ffn_dim": 64, "decoder_layers": 1, "dropout": 0.1}
DANGLE = {**BLOCKS, "fusion_layers": 1, "post_fusion_layers": 1, "max_relative": 4}
TAGGER = {
    "d_model": 32,
    "dropout": 0.1,
    "encoder": {"hidden": 16, "word_dim": 16, "char_dim": 8, "char_filters": 8, "layers": 1, "word_dropout": 0.0},
}
MODELS = {
    "transformer": {**BLOCKS, "encoder_layers": 1, "positions": "relative", "max_relative": 4},
    "lstm": {
        "embed_dim": 32,
        "hidden_dim": 32,
        "layers": 1,
        "dropout": 0.1,
        "head": {"type": "lexical", "lexicon": "simple"},
    },
    "dangle": DANGLE,
    "rdangle-shr": {**DANGLE, "interval": 2},
    "rdangle-sep": {**DANGLE, "interval": 2, "encoder_layers": 1, "head": {"type": "copy"}},
    "context-transformer": {
        **BLOCKS,
        "encoder_layers": 1,
        "decoder_layers": 2,
        "decoder": "interleave",
        "source_layers": [1],
        "context_layers": [2],
    },
    "supertag-tree": {**TAGGER, "node_dim": 16, "node_heads": 2, "state_heads": 2},
    "supertag-classifier": TAGGER,
    "hf-seq2seq": {},
    "rdangle-pretrained": {"fusion_layers": 1, "post_fusion_layers": 1, "interval": 2},
}
#: architectures on a local Hugging Face checkpoint: a tiny random BART built in the test's folder
#: (structseq.testing.hf_tiny, offline), whose word-level tokenizer knows the toy task's words
PRETRAINED = {"hf-seq2seq", "rdangle-pretrained"}
#: the task and the embedded dataset of the architectures that do not translate the toy task
DATASETS = {
    "context-transformer": ("context-seq2seq", "ctx-commands", "valid"),
    "supertag-tree": ("supertag", "ab-grammar", "dev"),
    "supertag-classifier": ("supertag", "ab-grammar", "dev"),
}
N_TRAIN = 32  # one batch: every update sees the same examples, so the loss falls within a few updates


def toy_tsv(folder: Path) -> Path:
    """A fixed tiny task: copy the words in capitals."""
    path = folder / "toy.tsv"
    if not path.exists():
        rng = random.Random(0)
        rows = [[rng.choice("abcdefgh") for _ in range(rng.randint(2, 6))] for _ in range(N_TRAIN)]
        path.write_text("".join(f"{' '.join(r)}\t{' '.join(r).upper()}\n" for r in rows))
    return path


def tiny_checkpoint(folder: Path) -> Path:
    """A random BART (width 32, 2 + 2 layers, dropout 0.1) over the toy task's words, saved once per folder."""
    from structseq.testing.hf_tiny import tiny_bart

    path = folder / "bart"
    if not (path / "config.json").exists():
        words = [*"abcdefgh", *"ABCDEFGH"]
        tiny_bart(path, words, d_model=32, layers=2, dropout=0.1, seed=1)
    return path


def config(
    arch: str, folder: Path, device: str, *, model: dict | None = None, data: dict | None = None, **train
) -> Path:
    """A YAML config of `arch` at a tiny size on `device` (train.* keys as keywords), written into `folder`."""
    if arch not in MODELS:
        requires = architectures()[arch]
        if requires:
            pytest.skip(
                f"{arch} needs model.{', model.'.join(requires)} (e.g. a local pretrained checkpoint): no "
                "tiny config here"
            )
        raise AssertionError(f"architecture '{arch}' has no tiny config in tests/train/test_gpu.py MODELS: add one")
    if arch in DATASETS:
        task, dataset, valid = DATASETS[arch]
        data_section = {"dataset": dataset, "valid": valid, "test": ["test"], "max_train_examples": N_TRAIN}
    else:
        task, toy = "seq2seq", str(toy_tsv(folder))
        data_section = {"dataset": "files", "train": toy, "valid": toy, "test": [toy]}
    own = {}
    if arch in PRETRAINED:
        task, own = "hf-seq2seq", {"pretrained": str(tiny_checkpoint(folder))}
    cfg = {
        "task": task,
        "data": {**data_section, **(data or {})},
        "model": {"arch": arch, **MODELS[arch], **own, **(model or {})},
        "optim": {
            "lr": 1e-2,
            "schedule": "constant",
            "warmup": 0,
            "max_tokens": None,
            "batch_size": 64,
            "clip_norm": 1.0,
            "label_smoothing": 0.1,
        },
        "train": {
            "max_steps": 12,
            "valid_every": 0,
            "log_every": 1,
            "seed": 1,
            "device": device,
            "eval_checkpoint": "last",
            **train,
        },
        "decode": {"max_len_a": 2.0, "max_len_b": 6, "batch_size": 64},
    }
    path = folder / f"{arch}-{len(list(folder.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def train(arch: str, folder: Path, device: str, name: str = "run", **kw) -> Path:
    out = folder / name
    api.train(config(arch, folder, device, **kw), out, show_progress=False)
    return out


def losses(run_dir: Path) -> list[float]:
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if "loss" in r]


def examples_of(run: api.Run, n: int = 16):
    return run.load_split()[2][:n]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """arch -> the run directory of a model trained 40 updates on `DEVICE` (one per architecture and module)."""
    runs = {}

    def get(arch: str) -> Path:
        if arch not in runs:
            runs[arch] = train(arch, tmp_path_factory.mktemp(arch), DEVICE, max_steps=40, log_every=40)
        return runs[arch]

    return get


# ---------------------------------------------------------------- training


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("arch", sorted(architectures()))
@pytest.mark.learned
def test_every_architecture_trains_and_its_loss_falls(arch, precision, device, tmp_path, learned_seed, learned):
    """12 updates at lr 1e-2 on one fixed batch (every update sees the same N_TRAIN examples): the last three
    losses sum below 0.9 of the first three. In fp32 on the CPU over train.seed 1-5 (`STRUCTSEQ_TEST_DEVICE=cpu
    STRUCTSEQ_LEARNED_SEEDS=1,2,3,4,5 pytest -m gpu -k loss_falls`, one thread, Intel Xeon, 2026-11-27) the
    ratio was 0.28-0.71 over the 10 architectures (worst: the random BARTs, hf-seq2seq and rdangle-pretrained,
    0.70-0.71 at every seed); on CUDA, bf16 above all, it is not yet checked over seeds (seed 1 passed on an H200)."""
    if precision == "bf16" and not device.startswith("cuda"):
        pytest.skip("train.bf16 is bfloat16 autocast on CUDA (a ConfigError elsewhere)")
    run = train(arch, tmp_path, device, bf16=precision == "bf16", seed=learned_seed)
    curve = losses(run)
    assert len(curve) == 12 and all(math.isfinite(x) for x in curve), curve
    ratio = learned(f"{arch}_{precision}_loss_ratio", sum(curve[-3:]) / sum(curve[:3]))
    assert ratio < 0.9, curve


# ---------------------------------------------------------------- numerics


@pytest.mark.parametrize("arch", sorted(architectures()))
def test_teacher_forced_equals_incremental(arch, device, trained, exact_fp32):
    run = api.load_run(trained(arch), device=device)
    if not hasattr(run.model, "incremental_log_probs"):
        pytest.skip(f"{arch} does not decode target tokens one at a time")
    with torch.no_grad():  # relative-position tables start at zero: randomise them so that the test sees them
        for name, p in run.model.named_parameters():
            if name.endswith("table"):
                p.normal_(0, 0.5)
    batch = run.task.to_device(run.task.batch(examples_of(run), run.vocabs), torch.device(device))
    with torch.no_grad():
        full, steps = run.model(batch), run.model.incremental_log_probs(batch)
    pad = run.task.ids.pad if arch in PRETRAINED else run.tgt_vocab.pad  # the checkpoint's own ids
    real = batch["tgt_out"].ne(pad)
    assert full.device.type == torch.device(device).type
    assert (full - steps)[real].abs().max().item() <= 1e-4


def _split(value):
    """(the prediction without its floats, its floats): outputs are compared exactly, scores within 1e-4."""
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    if isinstance(value, float):
        return "<float>", [value]
    if isinstance(value, dict):
        parts = {k: _split(v) for k, v in value.items()}
        return {k: p[0] for k, p in parts.items()}, [x for p in parts.values() for x in p[1]]
    if isinstance(value, (list, tuple)):
        parts = [_split(v) for v in value]
        return [p[0] for p in parts], [x for p in parts for x in p[1]]
    return value, []


def _scores(run: api.Run, examples, hyps) -> list[float]:
    """The log-probability of each hypothesis (tokens, then </s>) under `run`'s model, on its device."""
    contexts = [e.context_text for e in examples] if run.task.name == "context-seq2seq" else None
    rows = run.token_log_probs([e.source_text for e in examples], [" ".join(h) for h in hyps], contexts=contexts)
    ids = [run.tgt_vocab.encode(h) + [run.tgt_vocab.eos] for h in hyps]
    return [float(lp[torch.arange(len(i)), torch.tensor(i)].sum()) for lp, i in zip(rows, ids)]


@pytest.mark.parametrize("arch", sorted(architectures()))
def test_decoding_on_the_device_equals_the_cpu(arch, device, trained, exact_fp32):
    """Greedy outputs are equal; beam-5 hypotheses are equal and their scores within 1e-4."""
    cpu, dev = api.load_run(trained(arch), device="cpu"), api.load_run(trained(arch), device=device)
    examples = examples_of(cpu)
    for beam in (1, 5):
        a, b = cpu.decode_examples(examples, beam=beam), dev.decode_examples(examples, beam=beam)
        (out_a, floats_a), (out_b, floats_b) = _split(a), _split(b)
        assert out_a == out_b, f"beam {beam}"
        assert floats_a == pytest.approx(floats_b, abs=1e-4)
        tokens = all(isinstance(h, list) and all(isinstance(t, str) for t in h) for h in a)
        if beam > 1 and tokens and arch not in PRETRAINED:  # pretrained: detokenized text, scored above
            assert _scores(cpu, examples, a) == pytest.approx(_scores(dev, examples, b), abs=1e-4)


# ---------------------------------------------------------------- checkpoints and processes


@pytest.fixture
def deterministic():
    torch.use_deterministic_algorithms(True, warn_only=True)
    yield
    torch.use_deterministic_algorithms(False)


def _tensors(path: Path) -> dict[str, torch.Tensor]:
    ckpt = torch.load(path / "checkpoints" / "last.pt", map_location="cpu", weights_only=True)
    out = {f"model.{k}": v for k, v in ckpt["model"].items()}
    for i, state in ckpt["optimizer"]["state"].items():
        out.update({f"optimizer.{i}.{k}": v for k, v in state.items() if isinstance(v, torch.Tensor)})
    return out


def _differ(a: Path, b: Path) -> list[str]:
    ta, tb = _tensors(a), _tensors(b)
    return sorted(set(ta) ^ set(tb)) + [k for k in ta if k in tb and not torch.equal(ta[k], tb[k])]


def test_resume_on_the_device_is_bit_exact_and_the_checkpoint_evaluates_on_a_cpu(device, tmp_path, deterministic):
    """6 updates in one go == 3 updates, then resumed to 6 (dropout on: the device's RNG is restored too); the
    checkpoint then loads and evaluates in a process that sees no GPU."""
    straight = train("transformer", tmp_path, device, "straight", max_steps=6)
    part = train("transformer", tmp_path, device, "part", max_steps=3)
    assert api.resume(part, overrides=["train.max_steps=6"], show_progress=False)["steps"] == 6
    off = _differ(straight, part)
    if off:  # tell a resume bug from kernels that are not deterministic on this device
        again = train("transformer", tmp_path, device, "again", max_steps=6)
        pytest.fail(
            f"resumed run differs in {off[:6]}; a second uninterrupted run differs in {_differ(straight, again)[:6]}"
        )
    code = (
        "import json, sys, torch; from structseq import api; assert not torch.cuda.is_available(); "
        "m = api.load_run(sys.argv[1], device='cpu').evaluate(sys.argv[2], write_predictions=False); "
        "print(json.dumps(m['exact_match']))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(part), str(toy_tsv(tmp_path))],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.splitlines()[-1])["n"] == N_TRAIN


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("world", [1, 2], ids=["world_of_one", "world_of_two"])
def test_torchrun_matches_one_process(world, device, tmp_path):
    """`torchrun --nproc-per-node N -m structseq train` reaches the parameters of a plain run on the same global
    batches (dropout 0: ranks draw their own masks; Adam eps 1e-3, see tests/tasks/test_tasks.py). A world of one (the
    torchrun launch of a one-GPU machine, its environment variables set) is run by structseq as one plain process:
    NCCL's all-reduce is exercised by a world of two, which needs two GPUs (two ranks cannot share one under NCCL);
    on the CPU it is gloo's."""
    if world > 1 and device.startswith("cuda") and torch.cuda.device_count() < world:
        pytest.skip(f"NCCL needs a GPU per rank: {torch.cuda.device_count()} found")
    cfg = config(
        "transformer", tmp_path, "auto" if world > 1 else device, model={"dropout": 0.0}, max_steps=4, log_every=2
    )
    text = yaml.safe_load(cfg.read_text())
    text["optim"]["eps"] = 1e-3
    cfg.write_text(yaml.safe_dump(text))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if not device.startswith("cuda"):
        env["STRUCTSEQ_DDP_BACKEND"] = "gloo"
    launch = {
        "one": [],
        "ddp": ["-m", "torch.distributed.run", "--nproc-per-node", str(world), "--master-port", str(_free_port())],
    }
    for name, prefix in launch.items():
        r = subprocess.run(
            [sys.executable, *prefix, "-m", "structseq", "train", str(cfg), "-o", str(tmp_path / name), "-q"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    a, b = _tensors(tmp_path / "one"), _tensors(tmp_path / "ddp")
    for name, value in a.items():
        if name.startswith("model."):
            assert torch.allclose(value, b[name], atol=1e-5, rtol=0), name


# ---------------------------------------------------------------- synchronisations and memory


@contextmanager
def counting_syncs(device: str):
    """The host-device synchronisations inside (CUDA's sync debug mode warns on each), appended to the list it
    yields when the block ends; on a CPU there is nothing to count."""
    found: list[str] = []
    if not device.startswith("cuda"):
        yield found
        return
    before = torch.cuda.get_sync_debug_mode()  # nested blocks: the outer one counts on after the inner ends
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            yield found
        finally:
            torch.cuda.set_sync_debug_mode(before)
    found.extend(f"{w.filename}:{w.lineno}" for w in caught if "synchroniz" in str(w.message))  # the Python line


#: architectures whose forward and backward passes never wait for the device (no data-dependent shapes)
SYNC_FREE = {"transformer"}


@pytest.mark.parametrize("arch", sorted(architectures()))
def test_no_sync_per_update_beyond_the_logging_interval(arch, device, tmp_path, record_property, monkeypatch):
    """Runs of 3 and 7 updates that log, validate and save only at their end differ by 4 updates: those add no
    host-device synchronisation beyond the model's own (the Python-side shapes of the re-encoding points, packed
    LSTM lengths, tree depths: counted by one forward and backward on the same batch), and none at all for the
    architectures in SYNC_FREE. The final validation is left out of the count: its decoding stops when every
    hypothesis has ended, after as many steps as the weights (3 or 7 updates old) take, a check per step."""
    validate = Trainer.validate

    def validate_uncounted(self):
        with counting_syncs(device):
            return validate(self)

    monkeypatch.setattr(Trainer, "validate", validate_uncounted)
    train(arch, tmp_path, device, "warm-up", max_steps=1, log_every=100)  # one-off syncs (first kernels) paid here
    where = {}  # n -> the Python lines that synchronised, counted
    for n in (3, 7):
        with counting_syncs(device) as syncs:
            train(arch, tmp_path, device, f"n{n}", max_steps=n, log_every=100)
        where[n] = Counter(syncs)
    run = api.load_run(tmp_path / "n3", device=device)
    examples = run.load_split(run.config.data.train)[2][:N_TRAIN]  # the training batch of every update
    batch = run.task.to_device(run.task.batch(examples, run.vocabs), torch.device(device))
    run.model.train()
    with counting_syncs(device) as syncs:
        loss, _, _ = run.task.loss(run.model, batch, 0.1)
        loss.backward()
    per_update, model_syncs = (where[7].total() - where[3].total()) / 4, len(syncs)
    longer = {line: k for line, k in (where[7] - where[3]).items()}  # lines that synchronised more in 7 updates
    shorter = {line: k for line, k in (where[3] - where[7]).items()}
    record_property("syncs_per_update", per_update)
    record_property("model_syncs_per_forward_backward", model_syncs)
    record_property("more_in_7_updates", json.dumps(longer))
    record_property("more_in_3_updates", json.dumps(shorter))
    # the model's own, give or take one sync a run (not per update): on an H200, without the warm-up run, the
    # context Transformer's 3-update run synchronised once more than its 7-update run (-0.25 an update)
    assert abs(per_update - model_syncs) <= 0.25, (
        f"the training loop adds {per_update - model_syncs} per update: more in 7 updates at {longer}, "
        f"more in 3 at {shorter}"
    )
    if arch in SYNC_FREE:
        assert model_syncs == 0, syncs[:5]


def test_attention_leaves_cudnn_out_and_restores_its_flag(device):
    """bf16 heads of 64 are cuDNN attention's shapes: the call agrees with the math kernel and leaves the
    process's cuDNN flag as it found it (on a CPU: the plain SDPA, trivially)."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 8, 5 + i, 64, generator=g).to(device, torch.bfloat16) for i in (0, 2, 2))
    reference = torch.softmax((q.float() @ k.float().transpose(-1, -2)) / 8.0, -1) @ v.float()
    flag = torch.backends.cuda.cudnn_sdp_enabled()
    out = sdpa_without_cudnn(q, k, v)
    assert torch.backends.cuda.cudnn_sdp_enabled() == flag
    assert torch.allclose(out.float(), reference, atol=3e-2), (out.float() - reference).abs().max()


def _peak_bytes(device: str, fn) -> int | None:
    """CUDA bytes allocated at the peak of `fn()` beyond what was allocated before it (None on a CPU)."""
    if not device.startswith("cuda"):
        fn()
        return None
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    return torch.cuda.max_memory_allocated() - before


#: the stated bound: with `recompute_chunks`, Dangle's training peak is at most this share of the peak without it
RECOMPUTE_PEAK_SHARE = 0.5


def test_dangle_recomputed_chunks_bound_peak_memory(device, tmp_path, record_property):
    """Dangle with `recompute_chunks: true` (chunks of 2 re-encoding points; targets of 24-32 tokens, batches of
    64) trains to the same losses at most RECOMPUTE_PEAK_SHARE of the peak CUDA memory of the same run without it."""
    rng = random.Random(1)
    rows = [[rng.choice("abcdefgh") for _ in range(rng.randint(6, 8))] for _ in range(64)]
    path = tmp_path / "long.tsv"  # each word four times: long targets, so that the re-encoding points dominate
    path.write_text("".join(f"{' '.join(r)}\t{' '.join(w.upper() for w in r for _ in range(4))}\n" for r in rows))
    data = {"train": str(path), "valid": str(path), "test": [str(path)]}
    model = {
        "d_model": 64,
        "n_heads": 4,
        "ffn_dim": 128,
        "fusion_layers": 2,
        "post_fusion_layers": 2,
        "chunk_points": 2,
    }
    peaks, curves = {}, {}
    for recompute in (False, True):
        name = f"recompute-{recompute}"
        peaks[recompute] = _peak_bytes(
            device,
            lambda: train(
                "dangle", tmp_path, device, name, data=data, model={**model, "recompute_chunks": recompute}, max_steps=3
            ),
        )
        curves[recompute] = losses(tmp_path / name)
    assert curves[True] == pytest.approx(curves[False], rel=1e-4)
    if peaks[False] is not None:
        record_property("peak_mib", {str(k): v / 2**20 for k, v in peaks.items()})
        assert peaks[True] <= RECOMPUTE_PEAK_SHARE * peaks[False], peaks


# ---------------------------------------------------------------- issue 45: the fast path gives the same numbers

#: relative tolerance of the first update's loss (same weights, forward and backward only differ in rounding):
#: a TF32 product carries operands of 10 mantissa bits (relative error about 3e-4 per matmul, docs/gpu.md), bf16
#: about 4e-3; compounded in quadrature over the ~6 matmuls from embeddings to logits (x 2.5) and doubled for the
#: log-softmax's sensitivity. Later updates diverge chaotically, so they are compared as 50-update window means
#: against the plain run's own noise: 3 standard errors of its window, plus the per-step bound.
FIRST_STEP = {"tf32": 2e-3, "bf16": 2e-2, "compiled": 2e-3}


def _fast_config(folder: Path, device: str, updates: int, **train) -> Path:
    path = config("transformer", folder, device, max_steps=updates, **train)
    cfg = yaml.safe_load(path.read_text())
    cfg["optim"].update(num_buckets=4, static_shapes=True, lr=1e-3)  # one batch order on both paths
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.parametrize("path", ["tf32", "bf16", "compiled"])
def test_fast_path_losses_match_the_plain_fp32_path(path, device, tmp_path, record_property):
    """The first 500 updates (20 on a CPU) of the fast path against plain fp32 (TF32 off, not compiled), same
    batches and dropout masks (inductor draws eager's random numbers here: `fallback_random`): the first update
    within FIRST_STEP[path] relative, each 50-update window's mean loss within 3 standard errors of the plain
    run's window plus that bound. Not checked over seeds (train.seed 1; not yet run on a GPU): the margin rests on
    that derivation (docs/gpu.md), not on a measured spread."""
    if path == "bf16" and not ON_CUDA:
        pytest.skip("bf16 autocast is CUDA-only")
    import torch._inductor.config as inductor

    updates = 500 if ON_CUDA else 20
    fast = {
        "tf32": {"tf32": True, "compile": "off"},
        "bf16": {"tf32": True, "bf16": True, "compile": "off"},
        "compiled": {"tf32": False, "compile": "on", **({} if ON_CUDA else {"compile_backend": "aot_eager"})},
    }
    runs = {}
    for name, settings in (("plain", {"tf32": False, "compile": "off"}), ("fast", fast[path])):
        with inductor.patch(fallback_random=True):
            api.train(_fast_config(tmp_path, device, updates, **settings), tmp_path / name, show_progress=False)
        runs[name] = torch.tensor(losses(tmp_path / name), dtype=torch.float64)
    plain, fast_losses = runs["plain"], runs["fast"]
    eps = FIRST_STEP[path]
    assert abs(fast_losses[0] - plain[0]) <= eps * plain[0], (fast_losses[0], plain[0])
    window = min(50, updates)
    worst = 0.0
    for w in range(0, updates, window):
        a, b = plain[w : w + window], fast_losses[w : w + window]
        tol = 3 * a.std() / math.sqrt(len(a)) + eps * a.mean()
        worst = max(worst, float((b.mean() - a.mean()).abs() / tol))
        assert (b.mean() - a.mean()).abs() <= tol, (w, float(a.mean()), float(b.mean()), float(tol))
    record_property("worst_window_difference_over_tolerance", round(worst, 3))
