"""Issue 12, inputs: non-UTF-8 bytes, byte-order marks, folders given as files, reserved strings, lengths."""

from __future__ import annotations

import gzip
import io

import pytest

from structseq.compose.corpus import read_sentences
from structseq.data.readers import read_file, read_parallel, read_tsv
from structseq.data.scan import read_scan_file
from structseq.errors import DataError
from structseq.textio import read_text, stdin_lines


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("reader", [read_tsv, read_file])
def test_invalid_byte_names_file_line_and_byte(tmp_path, reader):
    p = _write(tmp_path / "t.tsv", b"dax\tRED\ncaf\xe9\tBLUE\n")  # Latin-1 e-acute on line 2
    with pytest.raises(DataError, match=r"t\.tsv:2: not UTF-8 \(byte 0xe9\)"):
        reader(p)


def test_utf16_file_says_utf16(tmp_path):
    p = _write(tmp_path / "t.tsv", "dax\tRED\n".encode("utf-16"))
    with pytest.raises(DataError, match=r"t\.tsv:1: not UTF-8 \(byte 0xff\).*UTF-16"):
        read_tsv(p)


def test_utf16_without_bom_is_named(tmp_path):
    p = _write(tmp_path / "t.tsv", "dax\tRED\n".encode("utf-16-le"))
    with pytest.raises(DataError, match=r"t\.tsv:1: NUL byte"):
        read_tsv(p)


def test_gzip_and_parallel_and_scan_and_compose_readers_report_lines(tmp_path):
    gz = tmp_path / "t.tsv.gz"
    with gzip.open(gz, "wb") as f:
        f.write(b"a\tb\nc\td\n\x80\tx\n")
    with pytest.raises(DataError, match=r"t\.tsv\.gz:3: not UTF-8 \(byte 0x80\)"):
        read_tsv(gz)
    src, tgt = _write(tmp_path / "s.txt", b"a\nb\n"), _write(tmp_path / "t.txt", b"x\n\xc3(\n")
    with pytest.raises(DataError, match=r"t\.txt:2: not UTF-8 \(byte 0xc3\)"):
        read_parallel(src, tgt)
    scan = _write(tmp_path / "scan.txt", b"IN: jump OUT: I_JUMP\nIN: w\xffalk OUT: I_WALK\n")
    with pytest.raises(DataError, match=r"scan\.txt:2: not UTF-8 \(byte 0xff\)"):
        read_scan_file(scan)
    with pytest.raises(DataError, match=r"t\.txt:2: not UTF-8"):
        read_sentences(tgt)


def test_truncated_gzip_is_a_data_error(tmp_path):
    gz = tmp_path / "t.tsv.gz"
    gz.write_bytes(gzip.compress(b"a\tb\n" * 1000)[:40])
    with pytest.raises(DataError, match=r"t\.tsv\.gz"):
        read_tsv(gz)


def test_byte_order_mark_is_stripped(tmp_path):
    p = _write(tmp_path / "t.tsv", b"\xef\xbb\xbfdax\tRED\n")
    assert read_tsv(p)[0].source == ("dax",)
    s = _write(tmp_path / "scan.txt", b"\xef\xbb\xbfIN: jump OUT: I_JUMP\n")
    assert read_file(s)[0].source == ("jump",)  # the IN: sniffing sees through the BOM
    src, tgt = _write(tmp_path / "a.txt", b"\xef\xbb\xbfdax\n"), _write(tmp_path / "b.txt", b"\xef\xbb\xbfRED\n")
    e = read_parallel(src, tgt)[0]
    assert (e.source, e.target) == (("dax",), ("RED",))
    assert read_sentences(src) == ["dax"]
    assert read_text(_write(tmp_path / "c.yaml", b"\xef\xbb\xbftrain: {}\n")) == "train: {}\n"


def test_directory_given_as_file_says_so(tmp_path):
    with pytest.raises(DataError, match="is a directory"):
        read_tsv(tmp_path)
    with pytest.raises(DataError, match="is a directory"):
        read_sentences(tmp_path)


def test_stdin_lines_checks_bytes():
    stream = io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfjump twice\nwalk \xfe\n"), encoding="utf-8")
    lines = stdin_lines(stream)
    assert next(lines) == "jump twice"
    with pytest.raises(DataError, match=r"<stdin>:2: not UTF-8 \(byte 0xfe\)"):
        next(lines)


# ---------------------------------------------------------------- reserved strings and lengths
from structseq.data.limits import length_limit  # noqa: E402


@pytest.mark.parametrize("token", ["</s>", "<unk>", "<pad>", "<s>"])
def test_reserved_tokens_are_rejected_with_file_and_line(tmp_path, token):
    p = _write(tmp_path / "t.tsv", f"dax\tRED\nwif\tGREEN {token} BLUE\n".encode())
    with pytest.raises(DataError, match=rf"t\.tsv:2: reserved token '{token}' in the target"):
        read_tsv(p)
    src, tgt = _write(tmp_path / "s.txt", f"a\n{token} b\n".encode()), _write(tmp_path / "g.txt", b"x\ny\n")
    with pytest.raises(DataError, match=rf"s\.txt:2: reserved token '{token}' in the source"):
        read_parallel(src, tgt)
    scan = _write(tmp_path / "scan.txt", f"IN: jump OUT: I_JUMP {token}\n".encode())
    with pytest.raises(DataError, match=rf"scan\.txt:1: reserved token '{token}' in the target"):
        read_scan_file(scan)


def test_reserved_strings_inside_tokens_are_ordinary_text(tmp_path):
    p = _write(tmp_path / "t.tsv", b"a</s>\t<s>x\n")
    assert read_tsv(p)[0].target == ("<s>x",)


def test_length_limit_errors_naming_the_line_or_skips_counting(tmp_path):
    p = _write(tmp_path / "t.tsv", b"a b\tX\n" + b" ".join([b"w"] * 50) + b"\tY\na\tZ " * 1 + b"\n")
    assert len(read_tsv(p)) == 3  # no limit outside a block
    with length_limit(10):
        with pytest.raises(DataError, match=r"t\.tsv:2: source has 50 tokens, more than the maximum length 10"):
            read_tsv(p)
    with length_limit(10, skip=True) as limit:
        kept = read_tsv(p)
    assert [e.target for e in kept] == [("X",), ("Z",)] and limit.skipped == [f"{p}:2"]
