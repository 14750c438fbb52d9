"""Build-time weight packing (NumPy): the device layouts constant tensors are
baked in, so the runtime never repacks them. Mirrors kernels/kiln/layouts.hpp,
which packs activations at run time; tests/test_codegen.py checks they agree.
"""
from __future__ import annotations

import numpy as np

C0 = 16


def _c1(c: int) -> int:
    return -(-c // C0)


def f32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """fp32 values -> bfloat16 bit patterns (uint16), round to nearest even; NaN stays a quiet NaN. NumPy has
    no bfloat16, so bf16 tensors are carried as these bits (as the emulator's f32_to_bf16 rounds)."""
    x = np.ascontiguousarray(a, np.float32).view(np.uint32)
    r = ((x + np.uint32(0x7FFF) + ((x >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(a, np.float32))
    return np.where(nan, ((x >> 16) | 0x40).astype(np.uint16), r)


def bf16_bits_to_f32(b: np.ndarray) -> np.ndarray:
    return (np.asarray(b, np.uint16).astype(np.uint32) << 16).view(np.float32)


def _staging(dtype: str):
    """The array type a Cube weight is padded in: fp16 directly (each value rounded once, as always), or fp32
    for bf16, rounded to bf16 bits by _cube_operand at the end."""
    if dtype not in ("fp16", "bf16"):
        raise ValueError(f"Cube operand dtype must be fp16 or bf16, got {dtype!r}")
    return np.float16 if dtype == "fp16" else np.float32


def _cube_operand(p: np.ndarray, dtype: str) -> np.ndarray:
    return f32_to_bf16_bits(p) if dtype == "bf16" else p


def oihw_to_fractal_z(w: np.ndarray, dtype: str = "fp16") -> np.ndarray:
    """Conv weight (Cout, Cin, Kh, Kw) -> FRACTAL_Z (Cin1*Kh*Kw, Cout1, 16 cout, 16 cin), fp16 or bf16 bits."""
    co, ci, kh, kw = w.shape
    p = np.zeros((_c1(co) * C0, _c1(ci) * C0, kh, kw), _staging(dtype))
    p[:co, :ci] = w
    # (CO1, 16o, CI1, 16i, kh, kw) -> (CI1, kh, kw, CO1, 16o, 16i)
    p = p.reshape(_c1(co), C0, _c1(ci), C0, kh, kw).transpose(2, 4, 5, 0, 1, 3)
    return _cube_operand(np.ascontiguousarray(p.reshape(_c1(ci) * kh * kw, _c1(co), C0, C0)), dtype)


def oihw_to_fractal_z_c04(w: np.ndarray, dtype: str = "fp16") -> np.ndarray:
    """Conv weight (Cout, Cin <= 4, Kh, Kw) -> FRACTAL_Z_C04 (K1, Cout1, 16 cout, 16 k) with k = tap * 4 + channel
    (tap = row-major over the window, channels padded to 4), K1 = ceil(Kh * Kw * 4 / 16): a small-channel conv's K
    order (Load3D's channelSize 4)."""
    co, ci, kh, kw = w.shape
    k1 = _c1(kh * kw * 4)
    p = np.zeros((_c1(co) * C0, kh, kw, 4), _staging(dtype))
    p[:co, :, :, :ci] = np.asarray(w).transpose(0, 2, 3, 1)
    q = np.zeros((_c1(co) * C0, k1 * C0), p.dtype)
    q[:, :kh * kw * 4] = p.reshape(_c1(co) * C0, kh * kw * 4)
    return _cube_operand(np.ascontiguousarray(q.reshape(_c1(co), C0, k1, C0).transpose(2, 0, 1, 3)), dtype)


def grouped_to_dense(w: np.ndarray, group: int) -> np.ndarray:
    """A grouped Conv weight (Cout, Cin/group, Kh, Kw) as the dense (Cout, Cin, Kh, Kw) one: block-diagonal, output
    channel o of group g = o // (Cout/group) keeps its weights at input channels g*Cin/group.., zeros elsewhere."""
    co, per_in, kh, kw = w.shape
    per_out = co // group
    dense = np.zeros((co, per_in * group, kh, kw), w.dtype)
    for g in range(group):
        dense[g * per_out:(g + 1) * per_out, g * per_in:(g + 1) * per_in] = w[g * per_out:(g + 1) * per_out]
    return dense


def kn_to_zn(b: np.ndarray, dtype: str = "fp16") -> np.ndarray:
    """GEMM weight (K, N) -> ZN fractals (K1, N1, 16 n, 16 k), fp16 or bf16 bits."""
    k, n = b.shape
    p = np.zeros((_c1(k) * C0, _c1(n) * C0), _staging(dtype))
    p[:k, :n] = b
    return _cube_operand(np.ascontiguousarray(p.reshape(_c1(k), C0, _c1(n), C0).transpose(0, 2, 3, 1)), dtype)


def dw_weight_to_c1hwc0(w: np.ndarray) -> np.ndarray:
    """Depthwise weight (C, 1, Kh, Kw) -> (C1, Kh, Kw, 16), fp16."""
    c, _, kh, kw = w.shape
    p = np.zeros((_c1(c) * C0, kh, kw), np.float16)
    p[:c] = w[:, 0]
    return np.ascontiguousarray(p.reshape(_c1(c), C0, kh, kw).transpose(0, 2, 3, 1))


def nchw_to_nc1hwc0(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    p = np.zeros((n, _c1(c) * C0, h, w), np.float16)
    p[:, :c] = x
    return np.ascontiguousarray(p.reshape(n, _c1(c), C0, h, w).transpose(0, 1, 3, 4, 2))


def nchw_to_nc1hwc0_c04(x: np.ndarray) -> np.ndarray:
    """A small-channel map (N, C <= 4, H, W) -> NC1HWC0_C04 (N, 1, H, W, 4) fp16, the channels padded to 4."""
    n, c, h, w = x.shape
    p = np.zeros((n, 1, h, w, 4), np.float16)
    p[:, 0, :, :, :c] = np.asarray(x).transpose(0, 2, 3, 1)
    return p


def pad_bias(b: np.ndarray) -> np.ndarray:
    out = np.zeros(_c1(b.size) * C0, np.float32)
    out[: b.size] = b
    return out


def fractal_z_to_oihw(p: np.ndarray, cout: int, cin: int, kh: int, kw: int) -> np.ndarray:
    """Inverse of oihw_to_fractal_z (drops the channel padding)."""
    q = np.asarray(p).reshape(_c1(cin), kh, kw, _c1(cout), C0, C0).transpose(3, 4, 0, 5, 1, 2)
    return np.ascontiguousarray(q.reshape(_c1(cout) * C0, _c1(cin) * C0, kh, kw)[:cout, :cin])


def oihw_to_winograd(w: np.ndarray, tile: int) -> np.ndarray:
    """3x3 conv weight (Cout, Cin, 3, 3) -> Winograd F(tile, 3) weights: U[xi] = G g G^T per position xi,
    computed in float64 from the fp16 weights and rounded to fp16 once, each U[xi] in FRACTAL_Z:
    (XI*Cin1, Cout1, 16 cout, 16 cin)."""
    from ..ir.winograd import transform_weights
    co, ci = w.shape[:2]
    u = transform_weights(np.asarray(w, np.float16).astype(np.float64), tile).astype(np.float16)  # (XI, Cout, Cin)
    xi = u.shape[0]
    p = np.zeros((xi, _c1(co) * C0, _c1(ci) * C0), np.float16)
    p[:, :co, :ci] = u
    p = p.reshape(xi, _c1(co), C0, _c1(ci), C0).transpose(0, 3, 1, 2, 4)
    return np.ascontiguousarray(p.reshape(xi * _c1(ci), _c1(co), C0, C0))


def fractal_z_to_winograd(p: np.ndarray, cout: int, cin: int, tile: int) -> np.ndarray:
    return oihw_to_winograd(fractal_z_to_oihw(p, cout, cin, 3, 3), tile)
