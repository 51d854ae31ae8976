"""Writing outputs safely: every file the toolkit writes goes through here (a run directory's own files follow
the same rules through `structseq.run.directory`, checkpoints through `atomic_open`).

- Atomic (`atomic_open`, `atomic_write`): a temporary file in the same folder, flushed to disk (fsync), then
  renamed over the target. A failure midway (a full disk, a kill) leaves the old file whole and no partial
  one; the temporary is removed; the OSError names the file (`ENOSPC` from a write names none by itself).
- Never over an input (`Outputs.check`): an output that is one of the command's inputs (the same path once
  resolved, or the same file through a link) is refused, naming both, before anything is computed.
- Never over a file the toolkit did not write: each folder it writes into keeps a manifest, `MANIFEST`, of the
  files it wrote there with their sha256; an existing file the manifest does not list with its current content
  (a user's own file, or one edited since) is refused unless `overwrite` (`--overwrite`), as `structseq train
  -o` refuses a folder holding files no run created. Rerunning a command over its own outputs needs no flag.
- Appended records (`append_lines`): one `os.write` on an O_APPEND file, cut back when short or failed, so a
  failure never leaves a partial line (JSON-lines records of the scripts).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

from structseq.errors import StructseqError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: the manifest is updated without a lock
    fcntl = None

#: the manifest of the files the toolkit wrote in a folder: {"files": {name: sha256}}
MANIFEST = ".structseq-outputs.json"


class OutputError(StructseqError):
    """An output the toolkit refuses to write: one of the command's inputs, a folder, or a file it did not write."""


def named(error: OSError, path: object) -> OSError:
    """`error` naming `path` when it names no file (a write's ENOSPC), so the error boundary prints the file."""
    if error.filename is not None:
        return error
    return OSError(error.errno, error.strerror or str(error), str(path))


#: a name read from a checkpoint or config that may become a file name: no folder, no "..", no leading dot
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_+-]*(\.[A-Za-z0-9_+-]+)*")


def plain_name(name: object, what: str) -> str:
    """`name` when it is safe as one file name (`PLAIN_NAME`, at most 100 characters), else an OutputError
    naming `what`: nothing read from a checkpoint or config chooses where a file is written."""
    if not isinstance(name, str) or len(name) > 100 or not PLAIN_NAME.fullmatch(name):
        raise OutputError(
            f"{what} {name!r} is not a plain name (letters, digits, _ + - and inner dots); refusing to "
            "write a file named after it"
        )
    return name


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_open(
    path: str | os.PathLike, mode: str = "w", *, encoding: str = "utf-8", newline: str | None = "\n"
) -> Iterator[IO]:
    """A file object for `path` written atomically: the data go to a temporary file in the same folder, which
    is flushed, fsynced and renamed over `path` when the block ends without an exception; otherwise it is
    removed and `path` is left as it was. `mode` "w" (text) or "wb" (bytes)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes a whole file: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise named(e, path) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # as open() would create it (mkstemp's are private)
        text = {} if mode == "wb" else {"encoding": encoding, "newline": newline}
        with os.fdopen(fd, mode, **text) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise named(e, path) from e
        raise


def atomic_write(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write `data` (text as UTF-8) to `path` atomically (`atomic_open`); returns the path."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)
    return Path(path)


def append_lines(path: str | os.PathLike, lines: Iterable[str]) -> None:
    """Append `lines` (each without its line end) to `path` in one write: a failure (a full disk) or a short
    write cuts the file back to its length before, so no partial line is ever left. A file whose last line was
    left unterminated (by an older writer) gets a line end first, so the new records start a line."""
    data = "".join(line.rstrip("\n") + "\n" for line in lines).encode("utf-8")
    if not data:
        return
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as e:
        raise named(e, path) from None
    try:
        start = os.fstat(fd).st_size
        if start and os.pread(fd, 1, start - 1) != b"\n":
            data = b"\n" + data
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")
            os.fsync(fd)
        except OSError as e:
            with suppress(OSError):
                os.ftruncate(fd, start)
            raise named(e, path) from None
    finally:
        os.close(fd)


def file_digest(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file: the same path once resolved, or the same inode (a hard or soft link)."""
    a, b = Path(a), Path(b)
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def input_files(specs: Iterable[object]) -> list[Path]:
    """The existing files among a command's input specs: paths, `SRC,TGT[,N]` parallel files, lists of these
    (e.g. the files `textio.recording_reads` saw); dataset names (`cogs`, `NAME:SPLIT`) and missing paths name
    no file here."""
    out = []
    for spec in specs:
        if spec is None:
            continue
        if isinstance(spec, (list, tuple, set)):
            out.extend(input_files(spec))
            continue
        for part in [spec] if isinstance(spec, os.PathLike) else str(spec).split(","):
            p = Path(part)
            if str(part) and p.is_file():
                out.append(p)
    return out


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive flock on the folder itself (no lock file): manifest updates of concurrent commands serialise."""
    if fcntl is None:  # pragma: no cover
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _manifest(folder: Path) -> dict[str, str]:
    """The folder's manifest ({} when missing or unreadable: then no file counts as the toolkit's)."""
    try:
        files = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, dict) else {}


def toolkit_wrote(path: str | os.PathLike) -> bool:
    """Whether the file at `path` is one the toolkit wrote and nobody changed since (its folder's manifest)."""
    path = Path(path)
    recorded = _manifest(path.parent).get(path.name)
    return recorded is not None and path.is_file() and file_digest(path) == recorded


def record_output(path: str | os.PathLike) -> None:
    """Add `path` (as it is now) to its folder's manifest."""
    path = Path(path)
    digest = file_digest(path)
    with _folder_lock(path.parent):
        files = _manifest(path.parent)
        files[path.name] = digest
        atomic_write(path.parent / MANIFEST, json.dumps({"files": dict(sorted(files.items()))}, indent=1) + "\n")


class Outputs:
    """The files one command writes: `check` refuses an output that is an input, a folder or a file the toolkit
    did not write (unless `overwrite`); `open`, `write` and `savefig` check, write atomically and record the
    file in its folder's manifest.

    `inputs` is read at every check, so a list that grows while the command reads (`textio.recording_reads`)
    protects every file read so far; give the command's input specs too, to refuse before computing."""

    def __init__(self, inputs: Iterable[object] = (), *, overwrite: bool = False):
        self.inputs, self.overwrite = inputs, overwrite

    def check(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        if path.name == MANIFEST:
            raise OutputError(f"{path}: the toolkit's record of the files it wrote there; choose another output")
        if path.is_dir():
            raise OutputError(f"{path}: is a folder; give a file to write")
        for source in input_files(self.inputs):
            if same_file(path, source):
                same = "" if str(source) == str(path) else f" ({source})"
                raise OutputError(
                    f"{path}: is an input of this command{same}; the output would replace it: "
                    "choose another output file"
                )
        if path.exists() and not self.overwrite and not toolkit_wrote(path):
            raise OutputError(
                f"{path}: exists and was not written by structseq (or was changed since); pass "
                "--overwrite to replace it, or choose another output"
            )
        return path

    @contextmanager
    def open(self, path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
        path = self.check(path)
        with atomic_open(path, mode) as f:
            yield f
        record_output(path)

    def write(self, path: str | os.PathLike, data: str | bytes) -> Path:
        with self.open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        return Path(path)

    def savefig(self, fig, path: str | os.PathLike, **kwargs) -> Path:
        """A matplotlib figure, in the format of the file's suffix (png without one; an unknown one is refused)."""
        fmt = Path(path).suffix.lstrip(".").lower() or "png"
        known = fig.canvas.get_supported_filetypes()
        if fmt not in known:
            raise OutputError(f"{path}: cannot draw a .{fmt} file; give one of .{', .'.join(sorted(known))}")
        with self.open(path, "wb") as f:
            fig.savefig(f, format=fmt, **kwargs)
        return Path(path)


#: for API callers that pass no `Outputs`: atomic writes, no refusal of existing files (inputs unknown)
UNCHECKED = Outputs(overwrite=True)
