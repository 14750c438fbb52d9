"""ConvTranspose as stride-phase convolutions: the index arithmetic (shared by the frontend's pads, lowering's
phase convolutions and the cost model's comparison of the ways to compute it).

ONNX ConvTranspose writes y[oh] += x[ih] * w[kh] for oh = ih * s - pad_begin + kh * d (per axis). The outputs of
one phase, oh = ph + s * q, are reached only by the taps kh with (ph + pad_begin - kh * d) divisible by s, from
ih = q + (ph + pad_begin - kh * d) / s: a stride-1 convolution of x with those taps flipped, dilated by
d / gcd(s, d). So the whole op is s_h * s_w dense convolutions over the original input (no inserted zeros
multiplied) whose outputs interleave into y."""
from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np


@dataclass(frozen=True)
class Phase:
    """One axis of one phase: outputs phase, phase + stride, ... (`count` of them) as a stride-1 convolution of
    the input with kernel taps `taps` (indices into the ConvTranspose kernel, in the convolution's order),
    dilation `dilation`, pads (`pad_begin`, `pad_end`); either pad may be negative (input rows never read)."""
    phase: int
    count: int
    taps: tuple[int, ...]
    dilation: int
    pad_begin: int
    pad_end: int


def phases(size: int, k: int, s: int, d: int, pad_begin: int, out: int) -> list[Phase]:
    """The `s` phases of one axis: input `size`, kernel `k`, stride `s`, dilation `d`, output `out`."""
    result = []
    for ph in range(s):
        count = max(0, -(-(out - ph) // s))
        taps = tuple(t for t in range(k - 1, -1, -1) if (ph + pad_begin - t * d) % s == 0)
        step = d // gcd(s, d)
        if not taps:
            result.append(Phase(ph, count, (), step, 0, 0))
            continue
        first = (ph + pad_begin - taps[0] * d) // s  # input row the first output's first tap reads
        pb = count - 1 + step * (len(taps) - 1) - (size - 1) + first
        result.append(Phase(ph, count, taps, step, -first, pb))
    return result


def resolve(in_hw: tuple[int, ...], kernel: tuple[int, ...], strides: tuple[int, ...], dilations: tuple[int, ...],
            output_padding: tuple[int, ...], placement: tuple[str, tuple[int, ...], tuple[int, ...]]
            ) -> tuple[tuple[int, ...], tuple[int, int]]:
    """(pads top, left, bottom, right; output H, W) as ONNX Runtime computes them from placement = (auto_pad, pads,
    output_shape) (output_shape empty when not given): explicit pads (NOTSET, VALID:
    zeros), or, with output_shape or SAME_*, the total padding s (in - 1) + output_padding + (k - 1) d + 1 - out
    split with the odd pixel at the end (SAME_UPPER) or at the beginning (SAME_LOWER, NOTSET with output_shape).
    Raises ValueError for a negative total padding or an empty output."""
    auto_pad, pads, output_shape = placement
    if output_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        want = tuple(output_shape[-2:]) if output_shape else tuple(i * s for i, s in zip(in_hw, strides))
        begin, end = [], []
        for i, k, s, d, op, o in zip(in_hw, kernel, strides, dilations, output_padding, want):
            total = s * (i - 1) + op + (k - 1) * d + 1 - o
            if total < 0:
                raise ValueError(f"output size {o} exceeds what the input reaches ({o + total}): negative padding")
            small, big = total // 2, total - total // 2
            b, e = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
            begin.append(b)
            end.append(e)
        pads = (begin[0], begin[1], end[0], end[1])
    elif auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    out = tuple(s * (i - 1) + op + (k - 1) * d + 1 - pads[a] - pads[a + 2]
                for a, (i, k, s, d, op) in enumerate(zip(in_hw, kernel, strides, dilations, output_padding)))
    if min(out) < 1:
        raise ValueError(f"the output would be {list(out)}: pads {list(pads)} remove all of it")
    return pads, (out[0], out[1])


def phase_weight(w: np.ndarray, group: int, taps_h: tuple[int, ...], taps_w: tuple[int, ...]) -> np.ndarray:
    """The OIHW Conv weight of one phase from the ConvTranspose weight w (Cin, Cout/group, kh, kw): per group,
    input and output channels swapped, the phase's taps in convolution order."""
    cin, cog = w.shape[0], w.shape[1]
    cig = cin // group
    sub = w[:, :, list(taps_h)][:, :, :, list(taps_w)]  # (Cin, Cout/g, jh, jw)
    sub = sub.reshape(group, cig, cog, len(taps_h), len(taps_w)).transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(sub.reshape(group * cog, cig, len(taps_h), len(taps_w)))


def problem(ph: Phase, axis: str) -> str:
    """Why one axis of a phase is not a plain convolution ("" if it is)."""
    if ph.count == 0:
        return ""
    if not ph.taps:
        return (f"{axis} phase {ph.phase} is reached by no kernel tap (kernel smaller than the stride): its outputs "
                f"are the bias alone")
    if ph.pad_begin < 0 or ph.pad_end < 0:
        return (f"{axis} phase {ph.phase} would need negative pads ({ph.pad_begin}, {ph.pad_end}) on its convolution "
                f"(its taps start or end past the input: large pads, or a kernel not much larger than the stride)")
    return ""
