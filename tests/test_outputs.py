"""What `outputs` promises at its boundaries: a written file gets the permissions `open()` would give it
(0o666 less the umask, not mkstemp's private 0o600); a failed write leaves the old file whole and no
temporary; an OSError without a file name gets the target's; appended records start a line even after an
unterminated one; the manifest itself, folders and the command's inputs (also through a link) are refused; a
file the toolkit wrote is replaced without --overwrite, an edited one is not."""

import errno
import os
import stat

import pytest

from structseq.outputs import (
    MANIFEST,
    OutputError,
    Outputs,
    append_lines,
    atomic_open,
    atomic_write,
    named,
    toolkit_wrote,
)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_get_the_permissions_open_would_give(tmp_path, umask):
    old = os.umask(umask)
    try:
        atomic_write(tmp_path / "a.txt", "x")
        Outputs().write(tmp_path / "b.txt", b"y")
        with open(tmp_path / "plain.txt", "w") as f:
            f.write("z")
    finally:
        os.umask(old)
    expected = stat.S_IMODE(os.stat(tmp_path / "plain.txt").st_mode)
    assert expected == 0o666 & ~umask
    for name in ("a.txt", "b.txt"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == expected, name


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    atomic_write(path, "old\n")
    with pytest.raises(RuntimeError):
        with atomic_open(path) as f:
            f.write("new, half")
            raise RuntimeError("killed")
    assert path.read_text() == "old\n" and sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    with pytest.raises(OSError) as e:
        with atomic_open(path) as f:
            raise OSError(errno.ENOSPC, "No space left on device")
    assert e.value.filename == str(path) and path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
    with pytest.raises(ValueError):
        with atomic_open(path, "a"):
            pass


def test_named_keeps_a_file_name_and_adds_a_missing_one():
    own = OSError(errno.EACCES, "denied", "/x/own")
    assert named(own, "/y") is own
    added = named(OSError(errno.ENOSPC, "full"), "/y/out")
    assert added.filename == "/y/out" and added.errno == errno.ENOSPC


def test_appended_records_start_a_line_and_are_whole(tmp_path):
    path = tmp_path / "records.jsonl"
    append_lines(path, ['{"a": 1}'])
    path.write_bytes(path.read_bytes() + b'{"torn": ')  # an older writer left half a line
    append_lines(path, ['{"b": 2}\n', '{"c": 3}'])
    assert path.read_text().splitlines() == ['{"a": 1}', '{"torn": ', '{"b": 2}', '{"c": 3}']
    append_lines(path, [])
    assert path.read_text().endswith('{"c": 3}\n')


def test_the_manifest_folders_and_inputs_are_refused(tmp_path):
    data = tmp_path / "data.tsv"
    data.write_text("a\tb\n")
    link = tmp_path / "link.tsv"
    link.symlink_to(data)
    hard = tmp_path / "hard.tsv"
    os.link(data, hard)
    outs = Outputs([str(data)], overwrite=True)
    for bad in (data, link, hard):
        with pytest.raises(OutputError, match="is an input of this command"):
            outs.check(bad)
    with pytest.raises(OutputError, match="is a folder"):
        outs.check(tmp_path)
    with pytest.raises(OutputError, match="record of the files it wrote"):
        outs.check(tmp_path / MANIFEST)
    assert data.read_text() == "a\tb\n"


def test_own_files_are_replaced_edited_and_foreign_ones_are_not(tmp_path):
    out = tmp_path / "pred.tsv"
    Outputs().write(out, "one\n")
    assert toolkit_wrote(out)
    Outputs().write(out, "two\n")  # its own output, as written: no flag needed
    out.write_text("edited by hand\n")
    assert not toolkit_wrote(out)
    with pytest.raises(OutputError, match="was not written by structseq"):
        Outputs().write(out, "three\n")
    assert out.read_text() == "edited by hand\n"
    Outputs(overwrite=True).write(out, "three\n")
    assert out.read_text() == "three\n" and toolkit_wrote(out)
    foreign = tmp_path / "mine.txt"
    foreign.write_text("mine")
    with pytest.raises(OutputError):
        Outputs().check(foreign)
