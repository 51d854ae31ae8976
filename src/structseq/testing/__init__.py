"""Helpers the test suite and the benchmarks share, in the manner of `torch.testing`: one home both import, so
benchmarks need neither the tests folder nor `sys.path` (issue 46).

- `structseq.testing.hf_tiny`: tiny random Hugging Face checkpoints built offline (needs `structseq[hf]`;
  transformers is imported inside each builder, so importing the module costs nothing more than torch);
- `structseq.testing.oracles`: plain reference formulations (a loop per step, per sentence) of models whose
  fast code the tests check against and the benchmarks time against;
- `structseq.testing.bench`: what several benchmarks measure alike (the fairseq-sized Transformer's config,
  FLOPs of one update, matmul throughput, a model that never ends a sentence early);
- `structseq.testing.fairseq_baseline` (and `fairseq_venv`, its virtual environment): fairseq 0.12 trained
  and timed on SCAN, the baseline of `benchmarks/bench_train.py` and `benchmarks/bench_decode_fairseq.py`.

Nothing here is imported by the toolkit itself (`import structseq` never loads it).
"""
