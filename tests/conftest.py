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
