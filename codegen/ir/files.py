"""The files kiln writes for its user (reports, traces, profiles, .npy outputs, tuning records): the path is
checked before any work starts, and the file is written whole or not at all.

`check_output_path` is the up-front check (the directory exists and takes a new file; the path is not a
directory, a device or a read-only file); `write_atomic` writes a temporary file in the target directory and
renames it into place once it is complete, so a reader, an interrupted run or a failed render never sees a
half-written or empty file, and a failure leaves the previous file as it was."""
from __future__ import annotations

import os
import secrets
from pathlib import Path


class OutputPathError(ValueError):
    """An output path kiln cannot write; the message names the option, the path and what is wrong."""


def check_output_path(path: str | os.PathLike, what: str = "") -> Path:
    """`path` as a Path if a file can be written there, else OutputPathError naming `what` (the option, e.g.
    'kiln visualize -o'), the path and the reason. Nothing is created."""
    p = Path(path)

    def bad(why: str) -> OutputPathError:
        return OutputPathError(f"{what + ' ' if what else ''}{path}: {why}")
    if not str(path).strip():
        raise OutputPathError(f"{what + ': ' if what else ''}the output path is empty; give a file name")
    if p.is_dir():
        raise bad("is a directory; give the name of a file (in it, or elsewhere)")
    if p.exists() and not p.is_file():
        raise bad("exists and is not a regular file (a device or a socket?); give the name of a file")
    parent = p.resolve().parent
    if not parent.is_dir():
        raise bad(f"the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise bad(f"the directory {parent} is not writable")
    if p.exists() and not os.access(p, os.W_OK):
        raise bad("the file exists and is read-only")
    return p


def write_atomic(path: str | os.PathLike, data: str | bytes, durable: bool = True) -> Path:
    """Writes `data` (text as UTF-8) to `path` through a temporary file beside it, renamed into place when
    complete; on any failure the temporary file is removed and `path` is untouched. durable: fsync before the
    rename (a user's file survives a crash whole; the build's generated files, remade by the next build,
    skip it)."""
    p = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    # An exclusive create rather than tempfile.mkstemp: mkstemp's 0600 mode would survive the rename, and a
    # report or an .npy output should get the usual umask-based mode.
    tmp = p.parent / f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "xb") as f:
            f.write(payload)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p
