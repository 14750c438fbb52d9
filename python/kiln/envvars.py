"""The environment variables the runtime reads as settings (KILN_STRICT, KILN_LOG), each read through one
function: a value outside the accepted words is said once per process on stderr, naming the variable, the
value and what is accepted, and the stated fallback is used (a typo must not silently switch a check off).
KILN_NUM_THREADS and OMP_NUM_THREADS are read once at import (kiln/__init__.py)."""
from __future__ import annotations

import os
import sys

_said: set[tuple[str, str]] = set()


def setting(var: str, accepted: dict[str, int], fallback: int, fallback_words: str) -> int:
    """The value of `var` looked up (stripped, case-insensitive) in `accepted`; unset or empty is accepted[""]."""
    raw = os.environ.get(var, "")
    key = raw.strip().lower()
    if key in accepted:
        return accepted[key]
    if (var, raw) not in _said:
        _said.add((var, raw))
        words = ", ".join(repr(k) for k in accepted if k)
        print(f"kiln: {var}={raw!r} is not one of {words}; {fallback_words}", file=sys.stderr, flush=True)
    return fallback


def strict() -> bool:
    """KILN_STRICT: 1/true/yes/on raise on the fp16 boundary's findings, 0/false/no/off (or unset) warn; any other
    value is taken as strict (the safe side)."""
    on, off = dict.fromkeys(("1", "true", "yes", "on"), 1), dict.fromkeys(("", "0", "false", "no", "off"), 0)
    return bool(setting("KILN_STRICT", {**off, **on}, 1, "taken as strict (KILN_STRICT=1)"))


def log_level() -> int:
    """KILN_LOG: 0 (or unset) silent, 1 a line per model call, 2 also the plan of a new input size; another value
    is taken as 1."""
    return setting("KILN_LOG", {"": 0, "0": 0, "1": 1, "2": 2}, 1, "taken as KILN_LOG=1")
