"""Calling a baked kernel: packing natural-layout arrays into the device layouts
the kernel takes (NC1HWC0, FRACTAL_Z, ZN), running it on the emulator, and
unpacking the result."""
from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

from . import _core, numerics
from .codegen.ir import layouts
from .codegen.ir.manifest import KernelRecord, TensorDesc, opspec_of_record
from .operands import check_operands, natural_shapes


def _f16_bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float16)


def _as_f16(bits: np.ndarray) -> np.ndarray:
    return bits.view(np.float16)


def as_packed(values: np.ndarray, dtype: str) -> np.ndarray:
    """Values (any float array) as a packed tensor of the record's dtype: fp16, fp32, or bf16 bit patterns
    (uint16, a KILN_DTYPE=bf16 Cube weight)."""
    if dtype == "bf16":
        from .codegen.ir.layouts import f32_to_bf16_bits
        return f32_to_bf16_bits(values)
    return np.ascontiguousarray(values, np.float16 if dtype == "fp16" else np.float32)


def _pad_bias(b: np.ndarray, length: int) -> np.ndarray:
    out = np.zeros(length, np.float32)
    out[: b.size] = np.asarray(b, np.float32).reshape(-1)
    return out


def pack_operand(a: np.ndarray, t: TensorDesc, tiling: dict) -> np.ndarray:
    """A natural-layout operand (NCHW, OIHW, [K, N], any shape) in the device layout and type `t` declares: one
    packer per layout (codegen/ir/layouts.py; fp16 through the C++ packers)."""
    if t.layout == "ND":
        return _pad_bias(a, t.shape[0]) if t.dtype == "fp32" else _f16_bits(a).reshape(t.shape)
    x = np.asarray(a, np.float32)
    if t.layout == "NC1HWC0":
        return _as_f16(_core.nchw_to_nc1hwc0(x))
    if t.layout == "NC1HWC0_C04":  # a small-channel input (codegen/ir/layouts.py)
        return layouts.nchw_to_nc1hwc0_c04(x)
    if t.layout == "FRACTAL_Z_C04":
        return layouts.oihw_to_fractal_z_c04(x, t.dtype)
    if t.layout == "C1HWC0":
        return _as_f16(_core.dw_weight_to_c1hwc0(x))
    if t.layout == "WINOGRAD_FRACTAL_Z":  # G g G^T, as the build bakes it
        return layouts.oihw_to_winograd(x.astype(np.float16), tiling["tile"])
    if t.layout in ("FRACTAL_Z", "ZN") and t.dtype == "bf16":  # NumPy packing: the C++ packers write fp16
        return layouts.kn_to_zn(x, "bf16") if t.layout == "ZN" else layouts.oihw_to_fractal_z(x, "bf16")
    if t.layout in ("FRACTAL_Z", "ZN"):
        return _as_f16(_core.kn_to_zn(x) if t.layout == "ZN" else _core.oihw_to_fractal_z(x))
    raise ValueError(f"operand {t.name}: no packer for layout {t.layout}")


class Kernel:
    """One baked kernel. `entry` is its manifest record (`record` the same as JSON)."""

    def __init__(self, entry: KernelRecord, core: Any = None):
        self.entry = entry
        self._core = core or _core  # the extension it was baked into: the installed one, or a `kiln compile` dir's
        self.name: str = entry.name
        self.family: str = entry.family
        self.variant: str = entry.variant
        self.spec: dict = entry.spec
        self.tiling: dict = entry.tiling
        self.last_stats: dict | None = None

    @cached_property
    def record(self) -> dict:
        """Its manifest record as JSON (manifest.json's entry)."""
        return self.entry.to_json()

    def __repr__(self) -> str:
        return f"<kiln.Kernel {self.name} variant={self.variant} blocks={self.entry.blocks}>"

    # ---- packed interface ------------------------------------------------------
    def empty_output(self) -> np.ndarray:
        return np.zeros(self.entry.output.shape, np.float16)

    def run_packed(self, *inputs: np.ndarray, out: np.ndarray | None = None,
                   l2_hits: Sequence[bool] | None = None, l2_reads: Sequence[int] | None = None) -> np.ndarray:
        """Runs on arrays already in the kernel's layouts (see record['inputs']). l2_hits: which inputs are in the
        chip's L2, one bool each, as a model step's L2 plan says (its manifest `l2_hits`); by default none is (the
        kernel called on its own: every GM read misses L2). l2_reads, with l2_hits: the bytes the step's cores
        read of each input (the manifest's `l2_reads`): re-reads of a cold input stream partly at the L2 rate."""
        out = self.empty_output() if out is None else out
        for i, a in enumerate((*inputs, out)):  # pybind11 would answer anything else with its signature dump
            if not isinstance(a, np.ndarray):
                what = "out" if i == len(inputs) else f"packed input {i}"
                raise TypeError(f"kernel {self.name}: {what} must be a NumPy array, got {type(a).__name__}")
        hits = None if l2_hits is None else [bool(h) for h in l2_hits]
        reads = None if l2_reads is None else [int(n) for n in l2_reads]
        self.last_stats = self._core.run(self.name, list(inputs), out, hits, reads)
        return out

    # ---- natural layouts -------------------------------------------------------
    @cached_property
    def opspec(self):
        """The op spec the kernel was baked from (codegen/ir/opspec.py)."""
        return opspec_of_record(self.entry)

    def pack(self, *args: np.ndarray) -> list[np.ndarray]:
        """Natural layouts -> the kernel's packed inputs (weights would be packed once, at build time): each
        operand, checked against its natural shape (kiln/operands.py), into the layout its record declares, by
        the one packer of that layout."""
        args = tuple(check_operands(self.record, args))  # the one check: count, numbers, natural shapes
        numerics.check(f"kernel {self.name}", "argument", self._fp16_operands(args), numerics.strict_from_env())
        group = self.record["spec"].get("group", 1) if self.record["features"]["kind"] == "conv2d" else 1
        if group > 1:  # a grouped conv's (Cout, Cin/group, kh, kw) weight, packed block-diagonal as the build does
            args = (args[0], layouts.grouped_to_dense(np.asarray(args[1], np.float32), group), *args[2:])
        with np.errstate(over="ignore"):  # NumPy's own overflow warning of the cast: said above, by name
            return [pack_operand(a, t, self.tiling) for a, t in zip(args, self.entry.inputs)]

    def _fp16_operands(self, args: tuple) -> list[tuple[str, np.ndarray]]:
        """(name, value) of the operands packed as fp16, the ones the fp16 boundary applies to (kiln/numerics.py;
        an fp32 bias or a bf16 weight holds values beyond +-65504); every operand where the natural operands do
        not pair up with the packed inputs (the conv chains)."""
        names = [n for n, _ in natural_shapes(self.record)]
        packed = self.entry.inputs
        if len(packed) != len(names):
            return list(zip(names, args))
        return [(n, a) for n, a, t in zip(names, args, packed) if t.dtype == "fp16"]

    def unpack(self, y: np.ndarray, like: np.ndarray | None = None) -> np.ndarray:
        """The kernel's output in its natural layout (as its spec's natural_output says)."""
        want = tuple(self.entry.output.shape)
        if not isinstance(y, np.ndarray) or y.shape != want or y.dtype != np.float16:
            got = f"{y.dtype} array of shape {y.shape}" if isinstance(y, np.ndarray) else type(y).__name__
            raise TypeError(f"kernel {self.name}: unpack takes the kernel's packed output (float16, shape {want}; "
                            f"what run_packed returns), got {got}")
        how = self.opspec.natural_output
        if how == "nchw":
            return _as_f16(_core.nc1hwc0_to_nchw(y.view(np.uint16), self.opspec.out_channels))
        if how == "like_input" and like is not None:
            return y.reshape(np.shape(like))
        return y

    def __call__(self, *args: np.ndarray) -> np.ndarray:
        """Natural layouts in (NCHW / OIHW / [M,K],[K,N] / any shape), fp16 natural layout out."""
        y = self.run_packed(*self.pack(*args))
        return self.unpack(y, like=args[0])
