"""A document's `python scripts/...` block runs with its writes confined: whatever its arguments say (`--out ../X`,
`--keep /elsewhere`, an option no one has listed yet), the script writes only under the folders it is given (the
repository root and a temporary folder, or under `report tables --check` the temporary folder alone, removed
after the block), and starts no process.

    python -m structseq.report.confine '{"folders": ["/repo", "/tmp/x"], "where": "..."}' scripts/NAME.py ARGS...

How: a Python audit hook (PEP 578), installed before the script runs, sees every file the interpreter opens for
writing and every file-system change (`open` with a writing mode or flag, `os.mkdir` / `remove` / `rename` /
`replace` / `link` / `symlink` / `chmod` / `utime` / ..., `shutil.copyfile` / `copytree` / `rmtree` / `move`),
resolves its path (symbolic links, `..`, a directory descriptor) and ends the process with one line on stderr and
exit status `REFUSED` when it lies outside the allowed folders; the same for starting a process (`subprocess`,
`os.fork`, `os.exec*`, `os.system`, `os.posix_spawn`), whose child the hook would not follow; and `os.open` of
a folder outside them (the open event does not carry a `dir_fd`, so a folder's descriptor would reach past it). `mkdir` of a folder
that exists writes nothing and passes (`Path.mkdir(exist_ok=True)`). Bytecode is not cached
(`PYTHONDONTWRITEBYTECODE`, set by the caller) and matplotlib's cache and `tempfile` go to the temporary folder.

What it confines: the scripts of this repository, run with the arguments a document gives them. An audit hook is
not a sandbox for hostile code (a C extension writing through its own calls is not seen); the scripts a block may
run are this repository's own (`tables.SCRIPT`), and none writes through a C library.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

#: the exit status of a block stopped for writing outside its folders or starting a process
REFUSED = 86
#: os.open flags that write
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
#: audit event -> the (path argument, its dir_fd argument or None) pairs the event writes
WRITES = {
    "os.mkdir": [(0, 2)],
    "os.rmdir": [(0, 1)],
    "os.remove": [(0, 1)],
    "os.rename": [(0, 2), (1, 3)],  # os.rename and os.replace
    "os.link": [(1, 3)],
    "os.symlink": [(1, 2)],
    "os.truncate": [(0, None)],
    "os.chmod": [(0, 2)],
    "os.chown": [(0, 3)],
    "os.utime": [(0, 3)],
    "os.mkfifo": [(0, 2)],
    "os.mknod": [(0, 3)],
    "os.setxattr": [(0, None)],
    "os.removexattr": [(0, None)],
    "os.chflags": [(0, None)],
    "shutil.copyfile": [(1, None)],
    "shutil.copymode": [(1, None)],
    "shutil.copystat": [(1, None)],
    "shutil.copytree": [(1, None)],
    "shutil.rmtree": [(0, 1)],
    "shutil.move": [(0, None), (1, None)],
    "shutil.chown": [(0, None)],
    "shutil.make_archive": [(0, None)],
    "shutil.unpack_archive": [(1, None)],
}
#: audit events that start a process (the hook does not follow it into the child)
SPAWNS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty"}


def _refuse(what: str) -> None:
    sys.stderr.write(f"{what}\n")
    sys.stderr.flush()
    os._exit(REFUSED)


def resolve(path, dir_fd=None) -> str | None:
    """The real absolute path an event names (None: an open descriptor, whose own opening was checked); a
    directory descriptor is read from /proc (Linux; elsewhere the hook cannot tell, so the write is refused)."""
    if isinstance(path, int):
        return None
    path = os.fsdecode(path)
    none = dir_fd is None or dir_fd < 0  # the events pass an absent dir_fd as -1
    base = os.getcwd() if none else os.readlink(f"/proc/self/fd/{dir_fd}")
    return os.path.realpath(os.path.join(base, path))


def inside(path: str, folders: list[str]) -> bool:
    return path == os.devnull or any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def _writes(event: str, args: tuple) -> list[str | None]:
    """The paths `event` writes (resolved), none for an event that writes nothing."""
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags > 0 and flags & WRITE_FLAGS
        )
        if writing:
            return [resolve(path)]
        # os.open of a folder (mode None): its descriptor would let a later os.open(NAME, dir_fd=fd) write there,
        # and the open event carries no dir_fd, so a folder outside is refused when it is opened
        folder = resolve(path) if mode is None else None
        return [folder] if folder is not None and os.path.isdir(folder) else []
    found = []
    for i, fd in WRITES.get(event, ()):
        if i < len(args):
            path = resolve(args[i], args[fd] if fd is not None and fd < len(args) else None)
            if not (event == "os.mkdir" and path is not None and os.path.isdir(path)):  # exists: writes nothing
                found.append(path)
    return found


def hook(folders: list[str], where: str):
    """The audit hook: refuse a write outside `folders` (real paths) or a new process (`where`: what it says)."""

    def audit(event: str, args: tuple) -> None:
        if event in SPAWNS:
            _refuse(f"a generated block starts no process ({event}: {args[0] if args else ''})")
        if event != "open" and event not in WRITES:
            return
        try:
            paths = _writes(event, args)
        except Exception as e:  # a path it cannot resolve is refused, not let through
            _refuse(f"a generated block writes only {where}: cannot tell where {event} {args} writes ({e})")
        for path in paths:
            if path is not None and not inside(path, folders):
                _refuse(f"a generated block writes only {where}, not {path} ({event})")

    return audit


def main(argv: list[str]) -> None:
    """`argv`: JSON {"folders": the allowed folders, "where": what a refusal says they are}, the script, its
    arguments."""
    confined = json.loads(argv[0])
    folders, where = [os.path.realpath(f) for f in confined["folders"]], confined["where"]
    sys.argv = argv[1:]
    sys.path[0] = os.path.dirname(os.path.abspath(argv[1]))
    sys.addaudithook(hook(folders, where))
    runpy.run_path(argv[1], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
