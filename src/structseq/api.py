"""The Python API: everything the CLI does is a call here, with the same names and defaults.

    from structseq.api import train, load_run
    train("configs/scan-jump/transformer.yaml", "runs/jump", overrides=["train.max_steps=2000"])
    run = load_run("runs/jump")
    run.translate(["jump twice"])            # -> ["I_JUMP I_JUMP"]
    run.evaluate("test", beam=5)             # -> {"exact_match": ..., "bleu": ..., ...}

A run knows its task (`run.task`), which does the decoding and the scoring, so the same calls serve
sequence, tree and context-aware models.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from structseq import evaluation
from structseq.config import Config, absolute_paths, apply_overrides, config_from_dict, load_config
from structseq.data.example import Example
from structseq.data.vocab import NamedVocabs, Vocab
from structseq.decode.batched import Candidate
from structseq.decode.sampling import Sampling
from structseq.decode.strategies import check_fits
from structseq.errors import ConfigError, StructseqError
from structseq.evaluation import prediction_label  # noqa: F401  (its old home)
from structseq.run.checkpoint import resolve_checkpoint  # noqa: F401  (the one rule: `api.resolve_checkpoint`)
from structseq.run.load import LoadedRun, load
from structseq.tasks import get_task
from structseq.train import loop
from structseq.train.device import resolve_device


def train(
    config: str | Path | Config,
    out_dir: str | Path,
    *,
    overrides: list[str] = (),
    seed: int | None = None,
    data_root=None,
    show_progress: bool = True,
) -> dict:
    """Train from a config file (or Config) with `key=value` overrides; returns a summary dict."""
    seeds = [f"train.seed={seed}"] if seed is not None else []
    if isinstance(config, Config):
        cfg = config_from_dict(apply_overrides(config.to_dict(), list(overrides) + seeds))
    else:
        cfg = load_config(config, list(overrides) + seeds)
    source = None if isinstance(config, Config) else config
    return loop.train(
        absolute_paths(cfg), out_dir, data_root=data_root, show_progress=show_progress, config_file=source
    )


def resume(run_dir: str | Path, *, overrides: list[str] = (), data_root=None, show_progress: bool = True) -> dict:
    """Continue an interrupted run exactly where its last checkpoint left it, with its saved config.

    A resumed run accepts a larger budget, `overrides=["train.max_steps=N"]`, and the runtime settings
    `train.threads`, `train.device`, `train.log_every`, `train.tensorboard`, `train.wandb` (recorded in the run's config-history.jsonl); any other
    override is an error, and so is a data file whose content changed since the run started. A run that already finished (its
    max_steps reached, or stopped early) is left unchanged: the summary says so (`stopped` is
    `already_finished`, `reason` why)."""
    return loop.resume(run_dir, overrides=overrides, data_root=data_root, show_progress=show_progress)


@dataclass
class Run(LoadedRun, NamedVocabs):
    """A trained model with its vocabularies, config and task, loaded from a run directory (`LoadedRun`'s
    fields: run_dir, config, model, vocabs, checkpoint, task)."""

    members: tuple[str, ...] = ()  # the run directories of an ensemble (`load_ensemble`); () for one run
    checkpoint_files: tuple[Path, ...] = ()  # the checkpoint file of each member: evaluations record their sha256
    saved_decode: dict | None = None  # the run's own decode settings, before `with_overrides`

    def with_overrides(self, overrides: Sequence[str]) -> Run:
        """This run (the same model) with `decode.KEY=VALUE` overrides applied to its config, validated by the
        config schema (a ConfigError names the key and its range); only the decode section may change."""
        if not overrides:
            return self
        for item in overrides:
            key = str(item).split("=", 1)[0].strip()
            if not key.startswith("decode."):
                raise ConfigError(
                    f"--set {item}: only decode.KEY=VALUE can be set when decoding a trained run "
                    f"(decode keys: {', '.join(self.config.to_dict()['decode'])})"
                )
        decode = apply_overrides({"decode": self.config.to_dict()["decode"]}, list(overrides))
        config_from_dict(decode)  # strictly: an unknown key is an error too (a saved config drops unknown keys)
        cfg = config_from_dict({**self.config.to_dict(), **decode}, saved=True)
        given = [f"--set {o}" for o in overrides if str(o).split("=", 1)[0].strip() == "decode.strategy"]
        check_fits(cfg.decode.strategy, self.model, given[-1] if given else "", cfg.decode)
        task = get_task(cfg)
        task.load_state_dict(self.task.state_dict())
        return replace(self, config=cfg, task=task)

    def sampled(self, sampling: Sampling | None) -> Run:
        """This run decoding by `sampling` (`Sampling.overrides`: the one route of a sampled output); None: itself."""
        return self.with_overrides(sampling.overrides()) if sampling is not None else self

    # ---------------------------------------------------------------- prediction
    @torch.no_grad()
    def decode_examples(
        self,
        examples: Sequence[Example],
        *,
        beam: int | None = None,
        show_progress: bool = False,
    ) -> list[Any]:
        """The task's prediction for each example (tokens for seq2seq); `run.sampled(Sampling(...))` samples."""
        return self.task.predict(self.model, examples, self.vocabs, beam=beam, show_progress=show_progress)

    def search(
        self,
        examples: Sequence[Example],
        *,
        nbest: int = 1,
        beam: int | None = None,
        show_progress: bool = False,
    ) -> list[list[Candidate]]:
        """The `nbest` best outputs of each example (beam search with a beam of at least `nbest`; of a run
        `sampled(Sampling(...))`, `nbest` samples), as `Candidate`s (tokens, log-probability, length-normalised score), best first;
        sequence models only (a tagger's k-best lists are per word: `decode_examples`). Tokens are the task's
        output words (`_outputs`: subword pieces joined)."""
        from structseq.decode.batched import run

        if self.model.search_interface != "sequence":
            raise ConfigError(
                f"n-best lists and sampling need a sequence model (task {self.task.name}, model "
                f"{type(self.model).__name__} decodes as {self.model.search_interface})"
            )
        return run(
            self.model,
            self.task,
            examples,
            self.config.decode,
            vocabs=self.vocabs,
            nbest=nbest,
            beam=beam,
            show_progress=show_progress,
        )

    def _outputs(self) -> tuple[Any, dict[str, int]]:
        """(output ids -> the task's output words, the model's special ids) as the task's `predict` reads them:
        a task decoding with a pretrained tokenizer's own ids (`task.ids`, `task.detokenize`: hf-seq2seq, whose
        search bans only padding, so its `bos` is `pad`, and forces eos at the length limit only where the
        checkpoint's generation config does), else the `tgt` vocabulary, subwords undone by `task.finish` where
        the task has one."""
        return (lambda ids: self.task.output_words(ids, self.vocabs)), self.task.special_ids()

    def _pieces(self, ids: list[int]) -> list[str]:
        """Output ids as the model's own tokens (a tokenizer's pieces, or the `tgt` vocabulary's; `<unk>` kept)."""
        return self.task.output_pieces(ids, self.vocabs)

    def translate(
        self, sources: Sequence[str], *, contexts: Sequence[str] | None = None, beam: int | None = None
    ) -> list[str]:
        """Decode raw (space-tokenised) source strings, each with its context string when given."""
        if contexts is not None and len(contexts) != len(sources):
            raise StructseqError(f"{len(sources)} sources but {len(contexts)} contexts")
        examples = [
            Example.from_text(s, context=None if contexts is None else contexts[i]) for i, s in enumerate(sources)
        ]
        for i, e in enumerate(examples, 1):
            self.check_input(e, "<input>", i)
        return [self.task.format_prediction(p) for p in self.decode_examples(examples, beam=beam)]

    def check_input(self, example: Example, where: str, line: int) -> None:
        """A DataError naming `where:line` for a reserved token in the source or context, or either longer than
        the run's limits (`data.limits.input_limits`: data.max_length, else model.max_length;
        model.max_context_length)."""
        from structseq.data.limits import check_input, input_limits

        check_input(example, {**input_limits(self.config), **self.task.input_measure()}, where, line)

    def predict(
        self,
        lines: Sequence[str],
        *,
        beam: int | None = None,
        where: str = "<input>",
        show_progress: bool = False,
    ) -> list[str]:
        """`structseq predict`: each input line parsed by the task (e.g. `source<TAB>context`), one output line.
        A line holding a reserved token or longer than the run's limits (`check_input`) is a DataError naming
        `where:line`."""
        examples = self.parse_lines(lines, where)
        return [
            self.task.format_prediction(p)
            for p in self.decode_examples(examples, beam=beam, show_progress=show_progress)
        ]

    def parse_lines(self, lines: Sequence[str], where: str = "<input>") -> list[Example]:
        """`predict`'s input lines as examples, each checked (`check_input`)."""
        examples = []
        for i, line in enumerate(lines, 1):
            e = self.task.parse_input(line)
            self.check_input(e, where, i)
            examples.append(e)
        return examples

    @torch.no_grad()
    def token_log_probs(
        self, sources: list[str], targets: list[str], batch_size: int = 64, *, contexts: list[str] | None = None
    ) -> list[torch.Tensor]:
        """Teacher-forced log-probabilities over the target vocabulary: one (len + 1, V) tensor each (len: the
        target's model tokens, subword pieces for a subword task; + 1 for </s>)."""
        from structseq.decode.batched import teacher_forced

        if contexts is not None and len(contexts) != len(sources):
            raise StructseqError(f"{len(sources)} sources but {len(contexts)} contexts")
        ex = [
            Example.from_text(s, t, context=None if contexts is None else contexts[i])
            for i, (s, t) in enumerate(zip(sources, targets))
        ]
        out, pad = [], self._outputs()[1].get("pad", Vocab.pad)
        for lp, tgt_out in teacher_forced(self.model, self.task, self.vocabs, ex, batch_size):
            for row, n in zip(lp.cpu(), tgt_out.ne(pad).sum(1).tolist()):
                out.append(row[:n].clone())
        return out

    def score(self, examples: Sequence[Example], batch_size: int = 64) -> list[dict]:
        """`structseq score`: each example's target scored teacher-forced: `score` (its log-probability, </s>
        included), `normalized` (as beam search ranks, `decode.len_penalty`), the model's target `tokens` (with
        </s>) and each one's log-probability (`token_scores`); the same numbers `token_log_probs` gives."""
        from structseq.decode.batched import target_scores
        from structseq.decode.search import normalized

        if not self.model.autoregressive:
            raise ConfigError(f"scoring given outputs needs an autoregressive model (task {self.task.name})")
        rows = target_scores(
            self.model, self.task, self.vocabs, examples, batch_size, pad=self._outputs()[1].get("pad", Vocab.pad)
        )
        out = []
        for e, (ids, tok) in zip(examples, rows):
            total = float(tok.sum())
            out.append(
                {
                    "source": e.source_text,
                    "target": e.target_text,
                    "score": total,
                    "normalized": normalized(total, len(ids) - 1, self.config.decode.len_penalty),
                    "tokens": self._pieces(ids),
                    "token_scores": tok.tolist(),
                }
            )
        return out

    def output_size(self, example: Example) -> int:
        """How many output ids the model scores: the length of its log-probability row at the first decoding step
        of `example` (the search's own protocol: encode, init_state, step from the task's bos)."""
        bos = self.task.special_ids().get("bos", Vocab.bos)
        device = next(self.model.parameters()).device
        with torch.no_grad():
            inputs = self.task.to_device(self.task.decode_inputs([example], self.vocabs), device)
            state = self.model.init_state(self.model.encode(inputs))
            lp, _ = self.model.step(torch.full((1,), bos, dtype=torch.long, device=device), state)
        return int(lp.shape[-1])

    def score_ids(self, examples: Sequence[Example], ids: Sequence[Sequence[int]], batch_size: int = 64) -> list[dict]:
        """`structseq score --nbest`: given output ids (an n-best entry's `ids`, without </s>) scored through the
        search's own steps, so `score` equals the search's score even where two id sequences detokenise to the
        same text; the rows of `score` (`target`: the ids' text)."""
        from structseq.decode.batched import forced_scores
        from structseq.decode.search import normalized

        words, specials = self._outputs()
        rows = forced_scores(self.model, self.task, self.vocabs, examples, ids, batch_size, specials)
        out = []
        for e, r, tok in zip(examples, ids, rows):
            total = float(tok.sum())
            out.append(
                {
                    "source": e.source_text,
                    "target": " ".join(words(list(r))),
                    "score": total,
                    "normalized": normalized(total, len(r), self.config.decode.len_penalty),
                    "tokens": self._pieces([*r, specials.get("eos", Vocab.eos)]),
                    "token_scores": tok.tolist(),
                }
            )
        return out

    def lexicon(self, min_prob: float = 0.05, *, keep_copies: bool = False):
        """The trained translation matrix L of a lexical-translation run as a `Lexicon` of its cells >= min_prob
        (`structseq lexicon show RUN_DIR`); plain copies (x -> x) only with `keep_copies`."""
        from structseq.models.heads import LexicalHead
        from structseq.models.lexical import rows_to_lexicon

        heads = [m for m in self.model.modules() if isinstance(m, LexicalHead)]
        if not heads:
            head = dict(self.model.named_children()).get("head")
            kind = "none" if head is None else type(head).__name__
            raise StructseqError(
                f"{self.run_dir}: not a lexical-translation run (its output head: {kind}), so it has no lexicon"
            )
        head = heads[0]
        return rows_to_lexicon(
            head.matrix().detach().cpu(),
            self.src_vocab,
            self.tgt_vocab,
            min_prob,
            method=f"trained L of {self.run_dir.name}",
            keep_copies=keep_copies,
        )

    # ---------------------------------------------------------------- evaluation
    def load_split(self, split: str | None = None, data_root=None) -> tuple[str, str, list[Example]]:
        """(dataset, split name, examples) of a split of the run's dataset, a file, or NAME:SPLIT. An example
        longer than the run's limits (`data.limits.input_limits`) is a DataError naming its line."""
        return evaluation.load_split(self, split, data_root)

    def evaluate(self, split: str | None = None, **options) -> dict:
        """Decode a split (default: the config's first test split) and compute every metric of the task:
        `structseq.evaluation.evaluate`, asked by `options`, the keywords of `evaluation.EvalOptions` (beam,
        data_root, bleu_tokenize, write_predictions, show_progress, limit, sampling, overwrite, metrics), which
        says what each means."""
        return evaluation.evaluate(self, evaluation.EvalOptions(split, **options))


def load_run(
    run_dir: str | Path, checkpoint: str | None = None, *, device: str = "auto", moved: Sequence[str] = ()
) -> Run:
    """Load `checkpoints/{checkpoint}.pt` of a run (default: the config's `train.eval_checkpoint`;
    `best` falls back to `last` when no validation ran) onto `device` (auto: CUDA when available). `moved`:
    `KEY=DIR` for a local folder the run reads that has moved (`model.pretrained=NEWDIR`;
    `structseq.config.moved_paths`), still checked against the content hash the run recorded.

    A missing or garbage config.yaml (when it names the default checkpoint), a corrupt checkpoint or one
    of the wrong layout, format or shapes is an error naming the file; a corrupt `best.pt` is never
    replaced by another checkpoint (`structseq.run.checkpoint.resolve_checkpoint`, as `train.init_from`).
    The loading is `structseq.run.load`'s."""
    loaded, path = load(run_dir, checkpoint, moved=moved)
    loaded.model.to(resolve_device(device)).eval()
    return Run(**vars(loaded), checkpoint_files=(path,), saved_decode=asdict(loaded.config.decode))


def load_ensemble(
    run_dirs: Sequence[str | Path], checkpoint: str | None = None, *, device: str = "auto", moved: Sequence[str] = ()
) -> Run:
    """Several runs decoded as one model (`structseq.decode.ensemble.Ensemble`: per step, the log of the
    members' mean probability); one run is returned as it is. Every run must have the same vocabularies, or
    the same tokens at other ids (remapped: `decode.ensemble.Remapped`; otherwise a ConfigError names the two
    runs and the fix), and task; the first run's config (decode settings, limits)
    and task serve the ensemble."""
    from structseq.decode.ensemble import Ensemble, Remapped, check_members, check_same_task_settings, holdout_fix

    if not run_dirs:
        raise ConfigError("give at least one run directory")
    if len(run_dirs) == 1:
        return load_run(run_dirs[0], checkpoint, device=device, moved=moved)
    runs = [load_run(d, checkpoint, device=device, moved=moved) for d in run_dirs]
    names = [str(r.run_dir) for r in runs]
    maps = check_members(
        names,
        [r.task.name for r in runs],
        [r.vocabs for r in runs],
        holdout_fix({str(r.run_dir): r.config for r in runs}),
    )
    check_same_task_settings({n: r.config.to_dict()["task"] for n, r in zip(names, runs)})
    models = [Remapped(r.model, m) if m else r.model for r, m in zip(runs, maps)]
    model = Ensemble(models, names).eval()
    return replace(
        runs[0],
        model=model,
        checkpoint="+".join(sorted({r.checkpoint for r in runs})),
        members=tuple(names),
        checkpoint_files=tuple(p for r in runs for p in r.checkpoint_files),
    )
