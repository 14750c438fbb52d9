"""ResizeSpec: the op spec of the resize_vector family (ONNX Resize and Upsample on H and W of NCHW), with the
per-axis source taps the kernel bakes: for each output row (column) the input rows (columns) it reads and their
weights, computed in float32 as ONNX Runtime computes them (its own module: opspec.py is at its size limit;
opspec lists it in SPEC_CLASSES)."""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from .eltwise_program import epilogue_steps, epilogue_tag
from .tensor import C0, Tensor, c1

COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_SHORT = {"half_pixel": "hp", "pytorch_half_pixel": "pthp", "asymmetric": "asym", "align_corners": "ac",
          "tf_half_pixel_for_nn": "tfnn", "round_prefer_floor": "rpf", "round_prefer_ceil": "rpc", "floor": "fl",
          "ceil": "ce", "": ""}

Tap = tuple[int, int, float, float]  # (first source index, second, weight of the first, weight of the second)


def source_coordinate(x: int, scale: float, out_len: int, in_len: int, coord: str) -> np.float32:
    """The input coordinate of output index x (ONNX Resize's coordinate_transformation_mode, in float32)."""
    f = np.float32
    xs, s = f(x), f(scale)
    if coord == "asymmetric":
        return f(xs / s)
    if coord == "align_corners":
        return f(0) if out_len == 1 else f(xs * f(in_len - 1) / f(out_len - 1))
    if coord == "tf_half_pixel_for_nn":
        return f((xs + f(0.5)) / s)
    if coord == "pytorch_half_pixel" and out_len == 1:
        return f(0)
    return f((xs + f(0.5)) / s - f(0.5))  # half_pixel, pytorch_half_pixel


def nearest_index(v: np.float32, mode: str) -> int:
    """ONNX Resize's nearest_mode applied to a source coordinate (std::round rounds halves away from zero)."""
    half_away = math.floor(abs(float(v)) + 0.5) * (1 if v >= 0 else -1)
    if mode == "round_prefer_floor":
        return math.floor(v) if v == np.float32(math.trunc(float(v))) + np.float32(0.5) else half_away
    if mode == "round_prefer_ceil":
        return half_away
    return math.floor(v) if mode == "floor" else math.ceil(v)


@dataclass(frozen=True)
class ResizeSpec:
    """y = Resize(x) over H and W of NC1HWC0 fp16 (N and C kept): mode nearest (with `nearest`, the ONNX
    nearest_mode) or linear (bilinear), coordinate mode `coord`, and the float32 scales the coordinate transform
    divides by (the given scales, or output / input size when sizes were given); `program`, an elementwise
    program of the output run on each output row before it is stored (codegen/passes/program_epilogue.py)."""
    n: int
    c: int
    h: int
    w: int
    ho: int
    wo: int
    mode: Literal["nearest", "linear"]
    coord: str
    nearest: str
    scale_h: float
    scale_w: float
    program: str = ""
    kind: ClassVar[Literal["resize"]] = "resize"
    natural_output: ClassVar[Literal["nchw"]] = "nchw"

    def __post_init__(self) -> None:
        if self.mode not in ("nearest", "linear") or self.coord not in COORDINATE_MODES or (
                self.mode == "nearest" and self.nearest not in NEAREST_MODES):
            raise ValueError(f"resize mode {self.mode!r}, coordinate mode {self.coord!r}, nearest mode "
                             f"{self.nearest!r}: not one of {COORDINATE_MODES} / {NEAREST_MODES}")
        if min(self.n, self.c, self.h, self.w, self.ho, self.wo) < 1 or min(self.scale_h, self.scale_w) <= 0:
            raise ValueError("resize sizes must be >= 1 and scales > 0")
        epilogue_steps(self.program)  # ValueError naming the step when malformed

    def taps(self, axis: int) -> list[Tap]:
        """Per output row (axis 0) or column (axis 1): the input indices it reads and their weights."""
        in_len, out_len, scale = (self.h, self.ho, self.scale_h) if axis == 0 else (self.w, self.wo, self.scale_w)
        out: list[Tap] = []
        for x in range(out_len):
            v = source_coordinate(x, scale, out_len, in_len, self.coord)
            if self.mode == "nearest":
                i = min(max(nearest_index(v, self.nearest), 0), in_len - 1)
                out.append((i, i, 1.0, 0.0))
                continue
            v = np.float32(min(max(v, np.float32(0)), np.float32(in_len - 1)))
            i0 = min(int(v), in_len - 1)
            i1 = min(i0 + 1, in_len - 1)
            w1 = float(np.float32(v - np.float32(i0)))
            out.append((i0, i0, 1.0, 0.0) if i0 == i1 or w1 == 0.0 else (i0, i1, float(np.float32(1) - w1), w1))
        return out

    @property
    def name(self) -> str:
        digest = hashlib.sha256(f"{self.scale_h!r}/{self.scale_w!r}".encode()).hexdigest()[:6]
        how = _SHORT[self.coord] + ("_" + _SHORT[self.nearest] if self.mode == "nearest" else "")
        return (f"resize_{self.mode}_{self.n}x{self.c}x{self.h}x{self.w}_to_{self.ho}x{self.wo}_{how}_{digest}"
                + epilogue_tag(self.program))

    @property
    def out_channels(self) -> int:
        return self.c

    @property
    def flops(self) -> int:  # bilinear: two weighted sums of two (3 ops each) per output value
        return self.n * self.c * self.ho * self.wo * (6 if self.mode == "linear" else 0)

    def inputs(self) -> list[Tensor]:
        return [Tensor("x", (self.n, c1(self.c), self.h, self.w, C0), "fp16", "NC1HWC0")]

    def output(self) -> Tensor:
        return Tensor("y", (self.n, c1(self.c), self.ho, self.wo, C0), "fp16", "NC1HWC0")

    @property
    def reduction_length(self) -> int:  # bilinear: a weighted sum of 4 values, rounded to fp16 per pass
        return 4 if self.mode == "linear" else 1

    @property
    def channel_padding(self) -> float:
        return 1 - self.c / (c1(self.c) * C0)
