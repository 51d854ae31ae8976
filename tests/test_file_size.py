"""No package file over 450 lines, counting every line: blank lines, comments and docstrings too (issue 46: a
reader reads them as well). tests/test_architecture.py bounds the code lines of files and functions besides."""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "structseq"
MAX_LINES = 450


def test_no_package_file_is_over_450_lines():
    over = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not over, f"over {MAX_LINES} lines, split by concern: {over}"
