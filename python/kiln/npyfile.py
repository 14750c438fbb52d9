"""The .npy files a user hands kiln (`kiln run --input`, `kiln validate --inputs DIR`), read by one function
that names the file for everything that can be wrong with it: not a regular file (a FIFO would block the
read), not .npy at all (text, a pickle), an .npz archive, pickled objects, a truncated file, or a header that
claims more data than the file holds (NumPy would try to allocate it first)."""
from __future__ import annotations

import math
import zipfile

import numpy as np

from .codegen.ir.files import InputPathError, check_input_file

MAGIC = b"\x93NUMPY"


def read_npy(path: str, what: str) -> np.ndarray:
    """The array in the .npy file `path` (in memory, as stored); ValueError starting with `what` (the option and
    the path, e.g. "--input x.npy") for any file that is not one readable .npy array."""
    try:
        check_input_file(path)
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except InputPathError as e:
        raise ValueError(f"{what}: cannot read it ({e.reason})") from None
    except OSError as e:
        raise ValueError(f"{what}: cannot read it ({e.strerror or e})") from None
    if head.startswith(b"PK"):  # a zip: what np.savez writes
        try:
            with zipfile.ZipFile(path) as z:
                names = ", ".join(n.removesuffix(".npy") for n in z.namelist()) or "none"
        except (zipfile.BadZipFile, OSError) as e:
            raise ValueError(f"{what}: not a readable .npy file (a broken zip archive: {e})") from None
        raise ValueError(f"{what}: is an .npz archive (arrays: {names}); give one array as an .npy file")
    if head != MAGIC:
        raise ValueError(f"{what}: not an .npy file (it does not start with NumPy's magic bytes; a text file? save "
                         "the array with numpy.save)")
    try:
        with open(path, "rb") as f:
            shape, dtype, data_bytes = _header(f)
    except (ValueError, EOFError, OSError) as e:
        raise ValueError(f"{what}: not a readable .npy file ({e})") from None
    if dtype.hasobject:
        raise ValueError(f"{what}: not a readable .npy file (it holds pickled Python objects; kiln reads numbers)")
    need = math.prod(shape) * dtype.itemsize
    if data_bytes < need:  # checked before NumPy allocates what the header claims
        raise ValueError(f"{what}: not a readable .npy file (truncated: its header says shape {shape} of {dtype}, "
                         f"{need} bytes, the file holds {data_bytes})")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, EOFError, OSError) as e:
        raise ValueError(f"{what}: not a readable .npy file ({e})") from None


def _header(f) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, bytes after the header) of the open .npy file `f`."""
    fmt = np.lib.format
    version = fmt.read_magic(f)
    shape, _, dtype = fmt.read_array_header_1_0(f) if version == (1, 0) else fmt.read_array_header_2_0(f)
    start = f.tell()
    f.seek(0, 2)
    return tuple(shape), dtype, f.tell() - start
