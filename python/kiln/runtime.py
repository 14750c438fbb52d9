"""Calling a baked kernel: packing natural-layout arrays into the device layouts
the kernel takes (NC1HWC0, FRACTAL_Z, ZN), running it on the emulator, and
unpacking the result."""
from __future__ import annotations

import numpy as np

from . import _core
from .operands import check_operands


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


class Kernel:
    """One baked kernel. `record` is its manifest entry."""

    def __init__(self, record: dict):
        self.record = record
        self.name: str = record["name"]
        self.family: str = record["family"]
        self.variant: str = record["variant"]
        self.spec: dict = record["spec"]
        self.tiling: dict = record["tiling"]
        self.last_stats: dict | None = None

    def __repr__(self) -> str:
        return f"<kiln.Kernel {self.name} variant={self.variant} blocks={self.record['blocks']}>"

    # ---- packed interface ------------------------------------------------------
    def empty_output(self) -> np.ndarray:
        o = self.record["output"]
        return np.zeros(o["shape"], np.float16)

    def run_packed(self, *inputs: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Runs on arrays already in the kernel's layouts (see record['inputs'])."""
        out = self.empty_output() if out is None else out
        for i, a in enumerate((*inputs, out)):  # pybind11 would answer anything else with its signature dump
            if not isinstance(a, np.ndarray):
                what = "out" if i == len(inputs) else f"packed input {i}"
                raise TypeError(f"kernel {self.name}: {what} must be a NumPy array, got {type(a).__name__}")
        self.last_stats = _core.run(self.name, list(inputs), out)
        return out

    # ---- natural layouts -------------------------------------------------------
    def _weight(self, i: int, w: np.ndarray) -> np.ndarray:
        """Input i, a Cube weight in natural layout (OIHW conv or [K, N] GEMM), packed as the kernel takes it:
        fp16, or bf16 bit patterns (uint16) in a KILN_DTYPE=bf16 build."""
        t = self.record["inputs"][i]
        w = np.asarray(w, np.float32)
        if t["dtype"] == "bf16":
            from .codegen.ir import layouts  # NumPy packing: the C++ packers write fp16
            return layouts.kn_to_zn(w, "bf16") if t["layout"] == "ZN" else layouts.oihw_to_fractal_z(w, "bf16")
        return _as_f16(_core.kn_to_zn(w) if t["layout"] == "ZN" else _core.oihw_to_fractal_z(w))

    def pack(self, *args: np.ndarray) -> list[np.ndarray]:
        """Natural layouts -> the kernel's packed inputs (weights would be packed once, at build time)."""
        s, kind = self.spec, self.record["features"]["kind"]
        args = tuple(check_operands(self.record, args))  # the one check: count, numbers, natural shapes
        if kind == "conv2d":
            x = _as_f16(_core.nchw_to_nc1hwc0(np.asarray(args[0], np.float32)))
            if s.get("mid"):  # a chain: x, w, [mid_bias], w_mid (OIHW 1x1), [bias], [residual]
                packed = [x, self._weight(1, args[1])]
                i = 2
                if s["mid_bias"]:
                    packed.append(_pad_bias(args[i], self.record["inputs"][i]["shape"][0]))
                    i += 1
                packed.append(self._weight(len(packed), args[i]))
                i += 1
                if s["bias"]:
                    packed.append(_pad_bias(args[i], self.record["inputs"][i]["shape"][0]))
                    i += 1
                if s.get("residual"):
                    packed.append(_as_f16(_core.nchw_to_nc1hwc0(np.asarray(args[i], np.float32))))
                return packed
            if self.record["inputs"][1]["layout"] == "WINOGRAD_FRACTAL_Z":  # G g G^T, as the build bakes it
                from .codegen.ir.layouts import oihw_to_winograd
                w = oihw_to_winograd(np.asarray(args[1], np.float32).astype(np.float16), self.record["tiling"]["tile"])
            else:
                w = self._weight(1, args[1])
            packed = [x, w]
            if s["bias"]:
                packed.append(_pad_bias(args[2], self.record["inputs"][2]["shape"][0]))
            i = 3 if s["bias"] else 2
            if s.get("residual"):
                packed.append(_as_f16(_core.nchw_to_nc1hwc0(np.asarray(args[i], np.float32))))
                i += 1
            if s.get("cin2"):  # the accumulated 1x1 source: its input (NCHW) and weights (OIHW)
                packed.append(_as_f16(_core.nchw_to_nc1hwc0(np.asarray(args[i], np.float32))))
                packed.append(self._weight(len(packed), args[i + 1]))
            return packed
        if kind == "dwconv2d":
            x = _as_f16(_core.nchw_to_nc1hwc0(np.asarray(args[0], np.float32)))
            w = _as_f16(_core.dw_weight_to_c1hwc0(np.asarray(args[1], np.float32)))
            packed = [x, w]
            if s["bias"]:
                packed.append(_pad_bias(args[2], self.record["inputs"][2]["shape"][0]))
            return packed
        if kind == "gemm":
            packed = [_f16_bits(args[0]), self._weight(1, args[1])]
            if s["bias"]:
                packed.append(_pad_bias(args[2], self.record["inputs"][2]["shape"][0]))
            return packed
        if kind in ("eltwise", "softmax", "transpose", "attention"):
            return [_f16_bits(a).reshape(t["shape"]) for a, t in zip(args, self.record["inputs"])]
        if kind == "layernorm":
            return [_f16_bits(args[0]).reshape(self.record["inputs"][0]["shape"]),
                    np.ascontiguousarray(args[1], np.float32), np.ascontiguousarray(args[2], np.float32)]
        if kind == "bgemm":
            return [_f16_bits(a) for a in args]
        if kind == "pool2d":
            return [_as_f16(_core.nchw_to_nc1hwc0(np.asarray(args[0], np.float32)))]
        raise AssertionError(kind)

    def unpack(self, y: np.ndarray, like: np.ndarray | None = None) -> np.ndarray:
        kind = self.record["features"]["kind"]
        if kind in ("conv2d", "dwconv2d", "pool2d"):
            c = self.spec["cout"] if kind == "conv2d" else self.spec["c"]
            return _as_f16(_core.nc1hwc0_to_nchw(y.view(np.uint16), c))
        if kind in ("eltwise", "softmax", "layernorm") and like is not None:
            return y.reshape(np.shape(like))
        return y

    def __call__(self, *args: np.ndarray) -> np.ndarray:
        """Natural layouts in (NCHW / OIHW / [M,K],[K,N] / any shape), fp16 natural layout out."""
        y = self.run_packed(*self.pack(*args))
        return self.unpack(y, like=args[0])
