"""A run's life, in one package below `structseq.train` and `structseq.api`:

- `layout`: the run directory's files (the one place that names them) and which folders are runs;
- `directory`: its lock, a new run's checks, a resumed run's session (data hashes, metrics cut back);
- `saved_config`: config.yaml, its history and edits, a saved config's decode strategy;
- `checkpoint`: checkpoint files (atomic, checksummed, weights-only) and which one a name means;
- `averaging`: step checkpoints (`train.keep_last`) and averaged ones (`structseq average`);
- `resume`: the rules of `--resume`; `rng`: the random state a checkpoint carries;
- `start`: where training starts (fresh, resumed, `train.init_from`), computed once and applied in one place;
- `load`: a trained run loaded for inference (`structseq.api.load_run`).
"""
