"""The files kiln reads and writes for its user: the path is checked before any work starts, and an output is
written whole or not at all.

`check_output_path` is the up-front check of an output (the directory exists and takes a new file; the path is
not a directory, a device, a FIFO, a symbolic-link loop or a read-only file, and its name fits the file system);
`write_atomic` writes a temporary file in the target directory and renames it into place once it is complete,
so a reader, an interrupted run or a failed render never sees a half-written or empty file, and a failure (a
full disk, a file-size limit, a directory that refuses new files) leaves the previous file as it was and is
reported as an OutputPathError naming the path. `check_input_file` is the check of a file kiln is given to read:
a regular file (a FIFO would block the read forever, a device never ends)."""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path


class OutputPathError(ValueError):
    """An output path kiln cannot write; the message names the option, the path and what is wrong."""


class InputPathError(ValueError):
    """A file kiln was given to read that is missing or not a regular file; the message names it, `reason` is
    what is wrong in words (for a caller that names the file its own way)."""

    def __init__(self, where: str, reason: str):
        self.reason = reason
        super().__init__(f"{where}: cannot read it ({reason})")


_STAT_ERRORS = {  # what os.stat's failure means for a path the user gave, in words
    errno.ELOOP: "is a loop of symbolic links",
    errno.ENOTDIR: "a part of the path before the name is a file, not a directory",
    errno.ENAMETOOLONG: "the name is too long for the file system",
    errno.EACCES: "a directory on the way is not accessible",
}


def _stat(p: Path, follow: bool = True) -> os.stat_result | None:
    """os.stat of `p`, None when nothing is there; OSError for the reasons in _STAT_ERRORS."""
    try:
        return p.stat() if follow else p.lstat()
    except FileNotFoundError:
        return None


def check_output_path(path: str | os.PathLike, what: str = "") -> Path:
    """`path` as a Path if a file can be written there, else OutputPathError naming `what` (the option, e.g.
    'kiln visualize -o'), the path and the reason. Nothing is created. A symbolic link is followed: the file it
    points to is what gets written."""
    p = Path(path)

    def bad(why: str) -> OutputPathError:
        return OutputPathError(f"{what + ' ' if what else ''}{path}: {why}")
    if not str(path).strip():
        raise OutputPathError(f"{what + ': ' if what else ''}the output path is empty; give a file name")
    if str(path).endswith(os.sep):
        raise bad("ends with '/', which names a directory; give the name of a file")
    try:
        st = _stat(p)
    except OSError as e:
        raise bad(_STAT_ERRORS.get(e.errno or 0, e.strerror or str(e))) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise bad("is a directory; give the name of a file (in it, or elsewhere)")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise bad("exists and is not a regular file (a device, a FIFO or a socket?); give the name of a file")
    target = Path(os.path.realpath(p))  # a dangling link: the file it would create
    parent = target.parent
    try:
        pst = _stat(parent)
    except OSError as e:
        raise bad(_STAT_ERRORS.get(e.errno or 0, e.strerror or str(e))) from None
    if pst is None:
        raise bad(f"the directory {parent} does not exist")
    if not stat.S_ISDIR(pst.st_mode):
        raise bad(f"{parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise bad(f"the directory {parent} is not writable")
    if st is not None and not os.access(p, os.W_OK):
        raise bad("the file exists and is read-only")
    return p


def write_atomic(path: str | os.PathLike, data: str | bytes, durable: bool = True) -> Path:
    """Writes `data` (text as UTF-8) to `path` through a temporary file beside it, renamed into place when
    complete; on any failure the temporary file is removed and `path` is untouched. A symbolic link is
    followed (the file it points to is replaced, the link stays). durable: fsync before the rename (a user's file
    survives a crash whole; the build's generated files, remade by the next build, skip it).
    OutputPathError naming the path when the write fails (a full disk, a file-size limit, a read-only file
    system)."""
    p = Path(path)
    target = Path(os.path.realpath(p)) if p.is_symlink() else p
    payload = data.encode("utf-8") if isinstance(data, str) else data
    # An exclusive create rather than tempfile.mkstemp: mkstemp's 0600 mode would survive the rename, and a
    # report or an .npy output should get the usual umask-based mode. The name is cut so that a long target
    # name still leaves room for the suffix.
    tmp = target.parent / f".{target.name[:80]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "xb") as f:
            f.write(payload)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise OutputPathError(f"{path}: cannot write it ({e.strerror or e}); nothing was written") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p


def check_input_file(path: str | os.PathLike, what: str = "") -> Path:
    """`path` as a Path if it is a regular file kiln can read, else InputPathError naming `what` (the option),
    the path and the reason: missing, a directory, a FIFO or device (whose read would block or never end)."""
    p = Path(path)
    where = f"{what + ' ' if what else ''}{path}"
    try:
        st = _stat(p)
    except OSError as e:
        raise InputPathError(where, _STAT_ERRORS.get(e.errno or 0, e.strerror or str(e))) from None
    if st is None:
        raise InputPathError(where, "No such file or directory")
    if stat.S_ISDIR(st.st_mode):
        raise InputPathError(where, "is a directory; give a file")
    if not stat.S_ISREG(st.st_mode):
        raise InputPathError(where, "not a regular file: a FIFO, device or socket")
    return p
