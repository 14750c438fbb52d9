"""The fp16 boundary of a model run (docs/numerics.md): inputs arrive as fp32 and are computed in fp16, whose
largest finite value is 65504. A value beyond it becomes inf on the way in, and a NaN or inf anywhere spreads
through the graph; ONNX Runtime, in fp32, would have computed something else. The glue reports it: values
outside fp16's range or non-finite, in an input on the way in or an output on the way out, warn once per model
and tensor with a NumericsWarning naming the tensor and the range seen; strict=True (or KILN_STRICT=1) raises
NumericsError instead."""
from __future__ import annotations

import threading
import warnings

import numpy as np

FP16_MAX = 65504.0  # largest finite fp16 value, (2 - 2^-10) * 2^15

_warned: set[tuple[str, str, str]] = set()  # (owner, kind, tensor): each said once per process
_warned_lock = threading.Lock()


class NumericsWarning(UserWarning):
    """A model input or output outside fp16's range or non-finite (see kiln/numerics.py)."""


class NumericsError(ValueError):
    """The same finding as NumericsWarning, raised by run(..., strict=True) or with KILN_STRICT=1."""


def strict_from_env() -> bool:
    """KILN_STRICT=1 (or true, yes, on) turns the warnings into errors (kiln/envvars.py: another value is said
    and taken as strict)."""
    from .envvars import strict
    return strict()


def finding(values: np.ndarray) -> str | None:
    """What is wrong with fp32 `values` at the fp16 boundary, in words, or None when all are finite and
    within fp16's range. Two reductions in the common case (min and max propagate NaN)."""
    if values.size == 0:
        return None
    lo, hi = float(values.min()), float(values.max())
    if lo >= -FP16_MAX and hi <= FP16_MAX:  # False for NaN
        return None
    finite = np.isfinite(values)
    bad = int(values.size - np.count_nonzero(finite))
    parts = []
    if bad:
        nan = int(np.count_nonzero(np.isnan(values)))
        parts.append(f"{bad} non-finite value(s) ({nan} NaN, {bad - nan} inf) of {values.size}")
    if bad < values.size:
        f_lo, f_hi = float(values[finite].min()), float(values[finite].max())
        beyond = int(np.count_nonzero(np.abs(values[finite]) > FP16_MAX))
        parts.append(f"finite values span [{f_lo:.6g}, {f_hi:.6g}]"
                     + (f", {beyond} beyond fp16's range +-{FP16_MAX:g}" if beyond else ""))
    return "; ".join(parts)


def check(owner: str, kind: str, tensors: list[tuple[str, np.ndarray]], strict: bool) -> None:
    """Checks each (name, array) at the boundary of `owner` ("model resnet50", "kernel gemm_..."; kind: input,
    output or argument): NumericsError when strict, else a NumericsWarning the first time this (owner, kind,
    tensor) has a finding."""
    for name, values in tensors:
        what = finding(values)
        if what is None:
            continue
        consequence = ("an overflow or NaN happened inside the model (fp16 range +-65504); normalise the input"
                       if kind == "output" else "fp16 turns values beyond +-65504 into inf, and NaN/inf spread "
                       "through the graph: the result is not what an fp32 engine computes")
        message = f"{owner}, {kind} {name!r}: {what}; {consequence}"
        if strict:
            raise NumericsError(message + " (strict: run(..., strict=False) or unset KILN_STRICT to only warn)")
        key = (owner, kind, name)
        with _warned_lock:
            if key in _warned:
                continue
            _warned.add(key)
        warnings.warn(message, NumericsWarning, stacklevel=4)
