"""`kiln.Core`: an emulated AI core driven one instruction at a time (the extension's `_core.Core`), with every
argument checked where it enters. pybind11 answers an argument it cannot convert (a float count, a negative
offset, a string where a tensor goes) with its overload signature dump; here each is a TypeError or
ValueError naming the call, the argument and what it takes. What the values mean (capacities, alignment,
repeat and stride ranges, flags) stays the emulator's to check: its errors are kiln.EmulationError and kin."""
from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from . import _core

Tensor = _core.Tensor  # a (buffer, byte offset, element count, dtype) handle made by alloc and at
_SIZE = 2 ** 64 - 1  # std::size_t
_UINT = 2 ** 32 - 1  # unsigned
_INT = 2 ** 31 - 1  # int
_INT_MIN = -(2 ** 31)
LANES = {"float16": 128, "bfloat16": 128, "float32": 64}  # vector lanes per 256-byte repeat


def _where(call: str) -> str:
    return "Core" if call == "Core" else f"Core.{call}"


def _text(call: str, arg: str, v: object) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{_where(call)}: argument {arg!r} must be a str, got {type(v).__name__} ({v!r})")
    return v


def _integer(call: str, arg: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise TypeError(f"{_where(call)}: argument {arg!r} must be an integer {lo}..{hi}, got {type(v).__name__} "
                        f"({v!r})")
    if not lo <= int(v) <= hi:
        raise ValueError(f"{_where(call)}: argument {arg!r} must be an integer {lo}..{hi}, got {int(v)}")
    return int(v)


def _flag(call: str, arg: str, v: object) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{_where(call)}: argument {arg!r} must be True or False, got {type(v).__name__} ({v!r})")
    return bool(v)


def _tensor(call: str, arg: str, v: object) -> Tensor:
    if not isinstance(v, Tensor):
        raise TypeError(f"{_where(call)}: argument {arg!r} must be a kiln Tensor (made by Core.alloc or Core.at), got "
                        f"{type(v).__name__}")
    return v


def _values(call: str, arg: str, v: object) -> np.ndarray:
    try:
        a = np.asarray(v)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{_where(call)}: argument {arg!r} must be an array of real numbers, got {type(v).__name__} "
                        f"({e})") from None
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{_where(call)}: argument {arg!r} must be an array of real numbers, got {a.dtype} "
                        f"({type(v).__name__})")
    return a


class Core:
    """An emulated AI core of a hardware profile ('ascend910b', 'ascend310p'), kind 'AIC' (Cube) or 'AIV'
    (Vector); tensors live in its buffers (L1, L0A, L0B, L0C, UB, BT) and instructions move and compute them,
    each timed on its pipe (`stats()`)."""

    def __init__(self, profile: str = "ascend910b", kind: str = "AIC", label: str = "interactive"):
        self._core = _core.Core(_text("Core", "profile", profile), _text("Core", "kind", kind),
                                _text("Core", "label", label))

    def alloc(self, buffer: str, count: int, dtype: str = "float16", name: str = "t") -> Tensor:
        """`count` elements of `dtype` (float16, bfloat16, float32) at the next free offset of `buffer`."""
        c = "alloc"
        return self._core.alloc(_text(c, "buffer", buffer), _integer(c, "count", count, 0, _SIZE),
                                _text(c, "dtype", dtype), _text(c, "name", name))

    def at(self, buffer: str, byte_offset: int, count: int, dtype: str = "float16", name: str = "t") -> Tensor:
        """A tensor at a given byte offset of `buffer` (for aliasing and alignment experiments)."""
        c = "at"
        return self._core.at(_text(c, "buffer", buffer), _integer(c, "byte_offset", byte_offset, 0, _SIZE),
                             _integer(c, "count", count, 0, _SIZE), _text(c, "dtype", dtype), _text(c, "name", name))

    def capacity(self, buffer: str) -> int:
        """Bytes of `buffer` on this core's profile."""
        return int(self._core.capacity(_text("capacity", "buffer", buffer)))

    def copy_in(self, dst: Tensor, src: object) -> None:
        """MTE2: host values (as GM) into an L1 or UB tensor; bfloat16 tensors take float32 values, rounded to
        nearest even."""
        self._core.copy_in(_tensor("copy_in", "dst", dst), _values("copy_in", "src", src))

    def peek(self, t: Tensor) -> np.ndarray:
        """A debug read of any local tensor (no instruction, no cycles); bfloat16 reads back as float32."""
        return self._core.peek(_tensor("peek", "t", t))

    def load2d(self, dst: Tensor, src: Tensor, repeat: int, src_stride: int = 1, dst_stride: int = 1,
               transpose: bool = False) -> None:
        """MTE1: `repeat` 512-byte fractals from L1 to L0A/L0B."""
        c = "load2d"
        self._core.load2d(_tensor(c, "dst", dst), _tensor(c, "src", src), _integer(c, "repeat", repeat, 0, _SIZE),
                          _integer(c, "src_stride", src_stride, 0, _SIZE),
                          _integer(c, "dst_stride", dst_stride, 0, _SIZE), _flag(c, "transpose", transpose))

    def mmad(self, c: Tensor, a: Tensor, b: Tensor, m: int, n: int, k: int, init: bool = True) -> None:
        """Cube: C (L0C, fp32) (+)= A (L0A) x B (L0B) over m x k x n."""
        f = "mmad"
        m, n, k = (_integer(f, arg, v, _INT_MIN, _INT) for arg, v in (("m", m), ("n", n), ("k", k)))
        self._core.mmad(_tensor(f, "c", c), _tensor(f, "a", a), _tensor(f, "b", b), m, n, k, _flag(f, "init", init))

    def fixpipe_to_ub(self, dst: Tensor, c: Tensor, count: int, relu: bool = False) -> None:
        """Fixpipe: `count` fp32 values of L0C to UB, optionally through ReLU."""
        f = "fixpipe_to_ub"
        self._core.fixpipe_to_ub(_tensor(f, "dst", dst), _tensor(f, "c", c), _integer(f, "count", count, 0, _SIZE),
                                 _flag(f, "relu", relu))

    def vector(self, op: str, dst: Tensor, src0: Tensor, src1: Tensor | None = None, repeat: int = 1, mask: int = 0,
               **options) -> None:
        """One level-0 Vector instruction over `repeat` 256-byte repeats; mask: the first `mask` lanes of each
        (0: all). options: scalar= (a real, for the scalar-operand ops; default 0.0) and strides= (a dict of
        dst_blk, src0_blk, src1_blk in 32-byte blocks and dst_rep, src0_rep, src1_rep)."""
        f = "vector"
        unknown = sorted(set(options) - {"scalar", "strides"})
        if unknown:
            raise TypeError(f"Core.vector: unexpected argument(s) {', '.join(map(repr, unknown))}; accepted: op, dst, "
                            f"src0, src1, repeat, mask, scalar, strides")
        scalar, strides = options.get("scalar", 0.0), options.get("strides")
        dst, src0 = _tensor(f, "dst", dst), _tensor(f, "src0", src0)
        if src1 is not None:
            _tensor(f, "src1", src1)
        lanes = LANES.get(dst.dtype, 128)
        if isinstance(scalar, bool) or not isinstance(scalar, Real):
            raise TypeError(f"Core.vector: argument 'scalar' must be a real number, got {type(scalar).__name__} "
                            f"({scalar!r})")
        if strides is not None and not isinstance(strides, dict):
            raise TypeError(f"Core.vector: argument 'strides' must be a dict of stride name to integer, got "
                            f"{type(strides).__name__}")
        checked = {_text(f, "strides key", key): _integer(f, f"strides[{key!r}]", v, 0, _UINT)
                   for key, v in (strides or {}).items()}
        self._core.vector(_text(f, "op", op), dst, src0, src1, _integer(f, "repeat", repeat, 0, _UINT),
                          _integer(f, f"mask (lanes of a {dst.dtype} repeat)", mask, 0, lanes), float(scalar),
                          checked)

    def set_flag(self, src_pipe: str, dst_pipe: str, event_id: int) -> None:
        """Sets event `event_id` from pipe `src_pipe` to `dst_pipe` (S, V, M, MTE1, MTE2, MTE3, FIX)."""
        f = "set_flag"
        self._core.set_flag(_text(f, "src_pipe", src_pipe), _text(f, "dst_pipe", dst_pipe),
                            _integer(f, "event_id", event_id, _INT_MIN, _INT))

    def wait_flag(self, src_pipe: str, dst_pipe: str, event_id: int) -> None:
        """Waits on event `event_id` from `src_pipe` to `dst_pipe`; SyncError if it was never set."""
        f = "wait_flag"
        self._core.wait_flag(_text(f, "src_pipe", src_pipe), _text(f, "dst_pipe", dst_pipe),
                             _integer(f, "event_id", event_id, _INT_MIN, _INT))

    def stats(self) -> dict:
        """Simulated cycles and per-pipe counters so far."""
        return self._core.stats()
