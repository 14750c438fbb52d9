"""Typed values of the `kiln` command line: each checks its range where argparse reads it, so an
out-of-range number or an unwritable output path stops the command before any work, with exit status 2
and argparse's `argument --NAME:` prefix naming the option. One validator per kind of range."""
from __future__ import annotations

import argparse
from collections.abc import Callable


def _integer(text: str) -> int | None:
    text = text.strip()
    body = text[1:] if text[:1] in "+-" else text
    return int(text) if body.isascii() and body.isdigit() else None  # "²".isdigit(), but int("²") fails


def int_range(lo: int, hi: int | None = None, what: str = "") -> Callable[[str], int]:
    """An integer lo..hi (hi None: no upper end); `what` says what the number counts."""
    accepted = f"an integer {lo}..{hi}" if hi is not None else f"an integer >= {lo}"
    suffix = f" ({what})" if what else ""

    def parse(text: str) -> int:
        v = _integer(text)
        if v is None or v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {accepted}{suffix}, got {text!r}")
        return v
    return parse


def share(text: str) -> float:
    """A share (of simulated time): a number 0..1."""
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not 0.0 <= v <= 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"expected a share between 0 and 1, e.g. 0.15, got {text!r}")
    return v


def threads(text: str) -> int:
    """A host thread count, bounded as kiln.set_num_threads is (the bound lives in the extension)."""
    import kiln
    why = kiln.thread_count_error(text)
    if why is not None:
        raise argparse.ArgumentTypeError(why)  # argparse names the option
    return int(text)


def output_file(text: str) -> str:
    """A file kiln will write: its directory exists and is writable, and it is not a directory (checked
    before the work; written atomically after it, codegen/ir/files.py)."""
    from .codegen.ir.files import OutputPathError, check_output_path
    try:
        check_output_path(text)
    except OutputPathError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text
