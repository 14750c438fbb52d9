"""Installed files checked against the manifest before use: each weights blob and .opspec file has its size
(blobs) and CRC-32 recorded at build time (manifest.json `checksums`), so a truncated, damaged or swapped file
is named instead of silently computing garbage. zlib's CRC-32 reads about 2 GB/s: resnet50's 51 MB blob costs
about 25 ms, once per load."""
from __future__ import annotations

import zlib


class InstallError(RuntimeError):
    """An installed kiln file is missing, damaged, or not the one this build wrote: reinstall kiln."""


def check_file(path: str, data: bytes | memoryview, checksums: dict[str, int], shown_as: object = None) -> None:
    """Raises InstallError naming the file when `data` (the content of the installed file `path`, relative to the
    package) is not what the build recorded."""
    where = shown_as or path
    expected = checksums.get(path)
    if expected is None:
        raise InstallError(f"{where}: not listed in this build's manifest (a file from another build?); "
                           f"reinstall kiln")
    got = zlib.crc32(data)
    if got != expected:
        raise InstallError(f"{where}: content differs from what this build wrote (CRC-32 {got:08x}, manifest "
                           f"{expected:08x}): the file is damaged or was replaced; reinstall kiln")
