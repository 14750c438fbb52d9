"""NumPy references for the kernel families, computed in float64 from the same
fp16-rounded inputs the kernels see, plus the error bound each check uses.

Error model for an fp32-accumulated dot product of length K rounded to fp16:
    |y - ref| <= 2**-11 * |ref|                       (final rounding to fp16, half an ulp)
               + 1.01 (K + 2) 2**-24 sum_i |a_i b_i|   (fp32 accumulation of K products and
                                                        the bias; products of fp16 are exact)
               + 2**-24                                (fp16 subnormal spacing near zero)
The 1.01 covers the second-order terms (gamma_K = Ku/(1-Ku) and the half ulp of
the accumulation error itself).
`bound()` evaluates it per element from the reference on absolute values.
"""
from __future__ import annotations

import numpy as np


def f16(a) -> np.ndarray:
    """Round to fp16 and widen to float64: exactly the values a kernel reads."""
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float64)


def bf16(a) -> np.ndarray:
    """Round to bf16 (nearest even) and widen to float64. Written here on its own (not codegen.ir.layouts'
    packer), so the kernels' bf16 rounding is checked against an independent one."""
    b = np.ascontiguousarray(a, np.float32).view(np.uint32)
    r = ((b + np.uint32(0x7FFF) + ((b >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def cube_operand(a, dtype: str = "fp16", activation: bool = True) -> np.ndarray:
    """The value a Cube kernel multiplies: fp16 operands as f16(); in a KILN_DTYPE=bf16 kernel an activation
    (fp16 in GM) rounded fp16 -> bf16 on its way into L1, a weight rounded fp32 -> bf16 at build time."""
    if dtype == "fp16":
        return f16(a)
    return bf16(f16(a) if activation else np.asarray(a, np.float32))


def conv2d_nchw(x, w, bias=None, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), relu=False):
    """x [N,C,H,W], w [O,C,KH,KW], pads (top, left, bottom, right)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    _o, _, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = stride, dilation, pads
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    cols = np.empty((n, c, kh, kw, ho, wo))
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
    y = np.einsum("nckluv,ockl->nouv", cols, w, optimize=True)
    if bias is not None:
        y += np.asarray(bias, np.float64)[None, :, None, None]
    return np.maximum(y, 0) if relu else y


def dwconv2d_nchw(x, w, bias=None, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), relu=False):
    """Depthwise: x [N,C,H,W], w [C,1,KH,KW]."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c, h, wd = x.shape
    _, _, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = stride, dilation, pads
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, c, ho, wo))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
            y += patch * w[None, :, 0, i, j, None, None]
    if bias is not None:
        y += np.asarray(bias, np.float64)[None, :, None, None]
    return np.maximum(y, 0) if relu else y


def pool2d_nchw(x, op, kernel, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1)):
    """Max or average pooling (average over the window, padding excluded: windows here never
    include padding for average pooling, which kiln supports only as a global pool); tap (i, j) of a window reads
    row i*dh, column j*dw of it (ONNX MaxPool's dilations)."""
    x = np.asarray(x, np.float64)
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw) = kernel, stride, pads, dilation
    fill = -np.inf if op == "max" else 0.0
    xp = np.full((n, c, h + pt + pb, w + pl + pr), fill)
    xp[:, :, pt:pt + h, pl:pl + w] = x
    ho, wo = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1, (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    taps = [xp[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
            for i in range(kh) for j in range(kw)]
    return np.max(taps, axis=0) if op == "max" else np.mean(taps, axis=0)


def gemm(a, b, bias=None, relu=False):
    y = np.asarray(a, np.float64) @ np.asarray(b, np.float64)
    if bias is not None:
        y += np.asarray(bias, np.float64)[None, :]
    return np.maximum(y, 0) if relu else y


def bound(ref: np.ndarray, abs_ref: np.ndarray, reduction_length: int) -> np.ndarray:
    """Per-element error bound of the model in the module docstring."""
    return 2.0 ** -11 * np.abs(ref) + 1.01 * (reduction_length + 2) * 2.0 ** -24 * abs_ref + 2.0 ** -24


def softmax(x, axis=-1):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layernorm(x, gamma, beta, eps):
    x = np.asarray(x, np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def gelu(x):
    from math import erf, sqrt
    x = np.asarray(x, np.float64)
    return 0.5 * x * (1 + np.vectorize(erf)(x / sqrt(2)))
