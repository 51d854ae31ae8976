"""fairseq side of the training-throughput comparison (fairseq 0.12 transformer on SCAN, CPU): the command line
of `structseq.testing.fairseq_baseline`, where the code lives so that the benchmarks that use it
(bench_train.py --only fairseq, bench_decode_fairseq.py) import the package, not this file (issue 46).

    .venv/bin/python benchmarks/fairseq_baseline.py --updates 20 --max-tokens 3500 --threads 2
    .venv/bin/python benchmarks/fairseq_baseline.py --updates 20 --no-logs   # without raw logs
    .venv/bin/python benchmarks/fairseq_baseline.py --batch-stats     # batching statistics only
    .venv/bin/python benchmarks/fairseq_baseline.py --dump-batches benchmarks/work/batches.json

fairseq's virtual environment (benchmarks/work/fairseq-venv, or $FAIRSEQ_VENV) is created on first use
(`structseq.testing.fairseq_venv`: a few minutes, fairseq's extensions are compiled).
"""

import sys

from structseq.testing.fairseq_baseline import main

if __name__ == "__main__":
    sys.exit(main())
