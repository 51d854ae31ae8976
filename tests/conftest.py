import json
import os

import pytest
import torch

from structseq.paths import data_root


@pytest.fixture(scope="session")
def shared_data():
    """The shared benchmark data root; tests that need it skip (with the reason) when it is absent."""
    root = data_root()
    if not root.is_dir():
        pytest.skip(f"benchmark data not found at {root} (set STRUCTSEQ_DATA)")
    return root


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    yield


# ---------------------------------------------------------------- learned numbers over several seeds
# A test that asserts a learned number (an accuracy, a loss ratio) takes the `learned_seed` fixture and is marked
# `learned`: by default it runs at one seed, its first; `STRUCTSEQ_LEARNED_SEEDS=1,2,3,4,5 pytest -m learned`
# runs each at every seed listed, and with STRUCTSEQ_LEARNED_LOG=FILE.jsonl each number a test reports through
# `learned` goes to FILE, summarised (min, max per test and number) at the end. Float kernels differ between
# CPUs, so a seeded trajectory is not portable: a threshold must hold with margin below the worst seed measured.


def learned_seeds() -> list[int]:
    raw = os.environ.get("STRUCTSEQ_LEARNED_SEEDS", "1")
    try:
        return [int(s) for s in raw.split(",") if s.strip()]
    except ValueError:
        raise pytest.UsageError(f"STRUCTSEQ_LEARNED_SEEDS={raw!r}: expected seeds like 1,2,3,4,5") from None


def pytest_generate_tests(metafunc):
    seeds = learned_seeds()
    if "learned_seed" in metafunc.fixturenames and len(seeds) > 1:  # one seed: the test's id stays as it was
        metafunc.parametrize("learned_seed", seeds, ids=[f"seed{s}" for s in seeds])


@pytest.fixture
def learned_seed() -> int:
    return learned_seeds()[0]


@pytest.fixture
def learned(request):
    """learned(name, value): record a learned number of this test (kept in STRUCTSEQ_LEARNED_LOG when set)."""
    log = os.environ.get("STRUCTSEQ_LEARNED_LOG")
    seed = request.node.funcargs.get("learned_seed")
    test = request.node.nodeid.split("[seed")[0]

    def record(name: str, value: float) -> float:
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"test": test, "name": name, "seed": seed, "value": value}) + "\n")
        return value

    return record


def pytest_terminal_summary(terminalreporter):
    log = os.environ.get("STRUCTSEQ_LEARNED_LOG")
    if not log or not os.path.isfile(log):
        return
    spread: dict[tuple, dict] = {}
    with open(log, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            spread.setdefault((r["test"], r["name"]), {})[r["seed"]] = r["value"]
    terminalreporter.section("learned numbers per seed")
    for (test, name), by_seed in sorted(spread.items()):
        values = [by_seed[s] for s in sorted(by_seed)]
        terminalreporter.write_line(
            f"{test} {name}: min {min(values):.4g} max {max(values):.4g} "
            + " ".join(f"s{s}={by_seed[s]:.4g}" for s in sorted(by_seed))
        )
