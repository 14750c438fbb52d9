"""Winograd minimal filtering for 3x3 stride-1 convolution: the transforms and a
NumPy model of the kernels' numerics.

F(m x m, 3x3) computes an m x m output tile from an alpha x alpha input patch
(alpha = m + 2) as

    Y = AT [ (G g G^T) * (BT d BT^T) ] AT^T          (* elementwise)

summed over input channels before the output transform. The matrices are the
Toom-Cook ones of Lavin & Gray (2015): F(2,3) interpolates at 0, 1, -1 and
infinity, F(4,3) at 0, 1, -1, 2, -2 and infinity. The kernel runs the input and
output transforms on the Vector unit (one `linear_program` row = one
instruction chain), the alpha^2 per-position products as batched Cube GEMMs,
and bakes the weight transform (`transform_weights`) at build time.

`conv2d_winograd_emulated` reproduces where the kernel rounds. Tolerances against a
float64 reference: `error_bound` (scalar, max|err| <= tol * max|ref|) and
`elementwise_bound` (per element, from the rounding model `error_sigma`), both checked
with benchmarks/winograd_error.py (the tables in docs/winograd-numerics.md).
Pure NumPy: imported by the codegen at build time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

U16 = 2.0 ** -11  # fp16 unit roundoff (half an ulp at 1.0)
U32 = 2.0 ** -24  # fp32 unit roundoff


@dataclass(frozen=True, eq=False)  # identity semantics: array fields
class WinogradTile:
    """F(m x m, r x r): output tile m, filter r, input patch alpha = m + r - 1."""
    m: int
    r: int
    alpha: int
    BT: np.ndarray = field(repr=False)  # (alpha, alpha) input transform
    G: np.ndarray = field(repr=False)   # (alpha, r) filter transform
    AT: np.ndarray = field(repr=False)  # (m, alpha) output transform

    def __post_init__(self):
        assert self.alpha == self.m + self.r - 1
        assert self.BT.shape == (self.alpha, self.alpha)
        assert self.G.shape == (self.alpha, self.r) and self.AT.shape == (self.m, self.alpha)
        for a in (self.BT, self.G, self.AT):
            a.setflags(write=False)  # shared module constants


def _make(m: int, bt, g, at) -> WinogradTile:
    return WinogradTile(m, 3, m + 2, np.array(bt, np.float64), np.array(g, np.float64), np.array(at, np.float64))


# Rows of BT are the coefficients (ascending powers) of prod_{k != j} (x - p_k);
# G row j is (1, p_j, p_j^2) / prod_{k != j} (p_j - p_k); AT column j is p_j^i.
# The point at infinity gives the last row/column. Signs as in Lavin & Gray.
TILES: dict[int, WinogradTile] = {
    2: _make(2,
             [[1, 0, -1, 0],
              [0, 1, 1, 0],
              [0, -1, 1, 0],
              [0, 1, 0, -1]],
             [[1, 0, 0],
              [1 / 2, 1 / 2, 1 / 2],
              [1 / 2, -1 / 2, 1 / 2],
              [0, 0, 1]],
             [[1, 1, 1, 0],
              [0, 1, -1, -1]]),
    4: _make(4,
             [[4, 0, -5, 0, 1, 0],
              [0, -4, -4, 1, 1, 0],
              [0, 4, -4, -1, 1, 0],
              [0, -2, -1, 2, 1, 0],
              [0, 2, -1, -2, 1, 0],
              [0, 4, 0, -5, 0, 1]],
             [[1 / 4, 0, 0],
              [-1 / 6, -1 / 6, -1 / 6],
              [-1 / 6, 1 / 6, -1 / 6],
              [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6],
              [0, 0, 1]],
             [[1, 1, 1, 1, 1, 0],
              [0, 1, -1, 2, -2, 0],
              [0, 1, 1, 4, 4, 0],
              [0, 1, -1, 8, -8, 1]]),
}


def tile(m: int) -> WinogradTile:
    """The F(m x m, 3x3) transforms; m must be one of TILES."""
    try:
        return TILES[m]
    except (KeyError, TypeError):
        raise ValueError(f"Winograd output tile m={m!r} not supported; accepted: "
                         f"{', '.join(str(k) for k in sorted(TILES))} (F(2x2,3x3), F(4x4,3x3))") from None


def transform_weights(w: np.ndarray, m: int) -> np.ndarray:
    """(Cout, Cin, 3, 3) weights -> U (alpha*alpha, Cout, Cin) float64, U[i*alpha + j] = (G g G^T)[i, j].

    Exact up to float64 rounding; callers round to fp16 once (what the kernel bakes)."""
    t = tile(m)
    w = np.asarray(w, np.float64)
    if w.ndim != 4 or w.shape[2:] != (3, 3):
        raise ValueError(f"Winograd weights must be (Cout, Cin, 3, 3), got {w.shape}")
    u = np.einsum("ik,ockl,jl->ijoc", t.G, w, t.G, optimize=True)
    return np.ascontiguousarray(u.reshape(t.alpha * t.alpha, *w.shape[:2]))


def linear_program(mat: np.ndarray) -> list[tuple[int, list[tuple[int, float]]]]:
    """Rows of `mat` as (row, [(col, coef), ...]) over the nonzero coefs, cols ascending.

    One entry is one Vector instruction chain dst[row] = sum coef * src[col]."""
    mat = np.asarray(mat, np.float64)
    if mat.ndim != 2:
        raise ValueError(f"linear_program needs a matrix, got shape {mat.shape}")
    return [(i, [(j, float(c)) for j, c in enumerate(row) if c != 0.0]) for i, row in enumerate(mat)]


def _apply_rows(prog, src: np.ndarray, axis: int) -> np.ndarray:
    """dst[..., row, ...] = sum coef * src[..., col, ...] along `axis`, term by term in src's
    dtype (each product rounded, then added), as the Vector chain evaluates it."""
    src = np.moveaxis(src, axis, 0)
    dst = np.zeros((len(prog),) + src.shape[1:], src.dtype)
    for row, terms in prog:
        acc = None
        for col, coef in terms:
            term = src[col] if coef == 1.0 else (-src[col] if coef == -1.0 else src[col] * src.dtype.type(coef))
            acc = term if acc is None else acc + term
        if acc is not None:
            dst[row] = acc
    return np.moveaxis(dst, 0, axis)


def _patches(x: np.ndarray, m: int, pads) -> tuple[np.ndarray, int, int]:
    """(N, C, TH, TW, alpha, alpha) overlapping input patches (stride m) of the NCHW input,
    zero-padded top/left by the pads and bottom/right to alpha + (T-1)*m rows/cols."""
    pt, pl, pb, pr = (int(p) for p in pads)
    if min(pt, pl, pb, pr) < 0:
        raise ValueError(f"pads must be >= 0, got {tuple(pads)}")
    n, c, h, w = x.shape
    ho, wo = h + pt + pb - 2, w + pl + pr - 2
    if ho < 1 or wo < 1:
        raise ValueError(f"input {h}x{w} with pads {tuple(pads)} is smaller than the 3x3 filter")
    th, tw = -(-ho // m), -(-wo // m)
    xp = np.zeros((n, c, th * m + 2, tw * m + 2), x.dtype)
    xp[:, :, pt:pt + h, pl:pl + w] = x
    a = m + 2
    return np.lib.stride_tricks.sliding_window_view(xp, (a, a), axis=(2, 3))[:, :, ::m, ::m], ho, wo


def _input_transform(d: np.ndarray, bt: np.ndarray) -> np.ndarray:
    """Patches (N, C, TH, TW, a, a) -> V = BT d BT^T as (a*a, N*TH*TW, C), in d's dtype."""
    prog = linear_program(bt)
    v = _apply_rows(prog, _apply_rows(prog, d, axis=4), axis=5)  # BT d, then (BT d) BT^T
    n, c, th, tw, a, _ = v.shape
    return v.transpose(4, 5, 0, 2, 3, 1).reshape(a * a, n * th * tw, c)


def _output_transform(mx: np.ndarray, at: np.ndarray, n: int, th: int, tw: int, ho: int, wo: int) -> np.ndarray:
    """Per-position products (a*a, N*TH*TW, Cout) -> AT M AT^T as (N, Cout, HO, WO), in mx's dtype."""
    m, a = at.shape
    prog = linear_program(at)
    mx = mx.reshape(a, a, n, th, tw, -1)
    y = _apply_rows(prog, _apply_rows(prog, mx, axis=0), axis=1)  # AT M, then (AT M) AT^T
    return y.transpose(2, 5, 3, 0, 4, 1).reshape(n, -1, th * m, tw * m)[:, :, :ho, :wo]


def _winograd(x: np.ndarray, u: np.ndarray, bias, m: int, pads, dtype, round_v) -> np.ndarray:
    """The pipeline in `dtype`: input transform, round_v(V), one GEMM per transformed position
    (u is (a*a, Cout, Cin) in `dtype`), output transform, bias."""
    t = tile(m)
    d, ho, wo = _patches(x.astype(dtype), m, pads)
    n, _, th, tw = d.shape[:4]
    v = round_v(_input_transform(d, t.BT))
    mx = np.matmul(v, u.transpose(0, 2, 1))  # (a*a, P, Cin) @ (a*a, Cin, Cout)
    y = _output_transform(mx, t.AT, n, th, tw, ho, wo)
    if bias is not None:
        y = y + np.asarray(bias, dtype).reshape(1, -1, 1, 1)
    return np.ascontiguousarray(y)


def _check(x, w, bias):
    if x.ndim != 4 or w.ndim != 4 or w.shape[2:] != (3, 3) or w.shape[1] != x.shape[1]:
        raise ValueError(f"need x (N,Cin,H,W) and w (Cout,Cin,3,3), got {x.shape} and {w.shape}")
    if bias is not None and np.shape(bias) != (w.shape[0],):
        raise ValueError(f"bias must be ({w.shape[0]},), got {np.shape(bias)}")


def conv2d_winograd_emulated(x16, w16, bias=None, m: int = 2, pads=(0, 0, 0, 0), *,
                             round_output: bool = False) -> np.ndarray:
    """What the Winograd kernel computes, rounding where it rounds (stride 1, dilation 1).

    x16 (N,Cin,H,W) fp16, w16 (Cout,Cin,3,3) fp16, bias (Cout,) fp32 or None,
    pads (top, left, bottom, right). Steps:
      U = fp16(G g G^T) in float64, rounded once (baked at build time);
      V = fp16(BT d BT^T), d the fp16 patch, both products evaluated in fp32;
      M[xi] = V[xi] @ U[xi]^T, exact products, fp32 accumulation (Cube);
      Y = (AT M) AT^T in fp32, + bias in fp32, cropped to HO x WO.
    Returns (N, Cout, HO, WO) float32 before the kernel's final fp16 rounding, or the
    fp16 result with round_output=True.
    """
    x16, w16 = np.asarray(x16, np.float16), np.asarray(w16, np.float16)
    _check(x16, w16, bias)
    u = transform_weights(w16.astype(np.float64), m).astype(np.float16).astype(np.float32)
    b = None if bias is None else np.asarray(bias, np.float32)
    y = _winograd(x16, u, b, m, pads, np.float32, lambda v: v.astype(np.float16).astype(np.float32))
    return y.astype(np.float16) if round_output else y


def conv2d_winograd_exact(x, w, bias=None, m: int = 2, pads=(0, 0, 0, 0)) -> np.ndarray:
    """The same algorithm in float64 with no intermediate rounding: equals the direct
    convolution to float64 precision (checks the transforms, not the kernel)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    _check(x, w, bias)
    return _winograd(x, transform_weights(w, m), bias, m, pads, np.float64, lambda v: v)


def conv2d_direct(x, w, bias=None, pads=(0, 0, 0, 0), dtype=np.float64) -> np.ndarray:
    """Direct 3x3 stride-1 convolution as one im2col GEMM of length Cin*9 in `dtype`
    (float64: the reference; float32 on fp16 inputs: fp32 accumulation, no other rounding)."""
    x, w = np.asarray(x), np.asarray(w)
    _check(x, w, bias)
    pt, pl, pb, pr = pads
    n, c, h, wd = x.shape
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), dtype)
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    ho, wo = h + pt + pb - 2, wd + pl + pr - 2
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # (N, C, HO, WO, 3, 3)
    cols = cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * 9)
    y = cols @ w.astype(dtype).reshape(w.shape[0], c * 9).T
    y = y.reshape(n, ho, wo, -1).transpose(0, 3, 1, 2)
    if bias is not None:
        y = y + np.asarray(bias, dtype).reshape(1, -1, 1, 1)
    return np.ascontiguousarray(y)


def error_sigma(x16, w16, m: int, pads=(0, 0, 0, 0)) -> np.ndarray:
    """Per-output standard deviation of the Winograd kernel's error before its final fp16
    rounding, (N, Cout, HO, WO) float64, from the rounding model: V and U are each rounded
    to fp16 once, with independent errors uniform in +-ulp/2 (variance ulp^2/12); they
    propagate linearly through the GEMM and AT . AT^T (variances through squared
    coefficients). fp32 arithmetic elsewhere is 2^13 finer and ignored.

    The error concentrates in the last row/column of each output tile (the point at
    infinity and AT's largest coefficients): for F(4,3) the corner's sigma is ~10x the
    first position's. Used as |y - ref| <= 2^-11 |ref| + Z_SIGMA * sigma (elementwise).
    """
    x16, w16 = np.asarray(x16, np.float16), np.asarray(w16, np.float16)
    _check(x16, w16, None)
    t = tile(m)
    d, ho, wo = _patches(x16.astype(np.float64), m, pads)
    n, _, th, tw = d.shape[:4]
    v = _input_transform(d, t.BT)  # exact: fp16 values times small integers
    u = transform_weights(w16, m).transpose(0, 2, 1)  # (a*a, Cin, Cout)
    var_v = np.spacing(v.astype(np.float16)).astype(np.float64) ** 2 / 12
    var_u = np.spacing(u.astype(np.float16)).astype(np.float64) ** 2 / 12
    var_m = np.matmul(var_v, u ** 2) + np.matmul(v ** 2, var_u)
    return np.sqrt(_output_transform(var_m, t.AT ** 2, n, th, tw, ho, wo))


# --- tolerances (measured in docs/winograd-numerics.md) -------------------------------------

# Mean relative variance of one fp16 rounding, in u^2: ulp^2/12 averaged over a binade
# (log-uniform mantissa) = (4/12) * 0.541 u^2. The direct kernel's measured RMS output
# error (0.42 u, the table's "rms direct" column) is sqrt of this.
KAPPA = 0.18
# The scalar max|err| / max|ref| is a ratio of two maxima: on tiny outputs it has a heavy
# tail. (max/max / 2^-11 - 1) / noise_gain(m) reached 0.25 (F(2,3)) and 0.82 (F(4,3)) on the
# ResNet-50 shapes, 3.5 on 144-8192 outputs and 5.1 on 9-16 outputs (5000 normal-data runs
# per small shape: benchmarks/winograd_error.py --tail-seeds 5000). SAFETY covers them all.
SAFETY = 6.0
# Elementwise: |err| / error_sigma() (before the output rounding) reached 4.7 in the main
# table, tails no heavier than Gaussian; |err| / elementwise_bound() peaked at 0.79 over
# ~5.5e7 outputs (the 5000-run tail). 7 sigma leaves P < 3e-12 per element.
Z_SIGMA = 7.0


def noise_gain(m: int) -> float:
    """RMS Winograd error (before the output rounding) at the worst output-tile position, in
    units of u * RMS(output), for inputs and weights i.i.d. with zero mean (the rounding
    model of error_sigma averaged over the data): sqrt(2 KAPPA / 9) * max_i f(i), with
    f(i) = sum_a AT[i,a]^2 |BT[a,:]|^2 |G[a,:]|^2 (two roundings, V and U; 9 taps per
    channel in the output's variance). 1.0 for F(2,3); 18.9 for F(4,3), whose last output
    row/column takes the +-2 points' products times 8 and the infinity point's (|BT row|^2
    = 42). The mean of f instead of its max gives the RMS over a layer: 1.0 and 6.5."""
    t = tile(m)
    f = (t.AT ** 2) @ ((t.BT ** 2).sum(1) * (t.G ** 2).sum(1))
    return math.sqrt(2 * KAPPA / 9) * float(f.max())


def error_bound(m: int, k_len: int) -> float:
    """Relative tolerance for a Winograd F(m,3) kernel's fp16 output against the float64
    reference of the same fp16 inputs: max|y - ref| <= error_bound(m, k_len) * max|ref|.

        error_bound = 2^-11 * (1 + SAFETY * noise_gain(m)) + k_len * 2^-24
                    = 2^-11 * 7.0 (F(2,3)) or 2^-11 * 114.2 (F(4,3)), + k_len * 2^-24

    2^-11 is the output's own fp16 rounding; noise_gain(m) the worst tile position's
    error from rounding V and U to fp16 (the same model predicts the table's RMS column;
    in this metric the error does not grow with k_len, since error and output are both sums
    over channels with random signs); SAFETY the measured tail of this max/max ratio, set by
    outputs of 9-16 elements (with >= 144 outputs, 4 would do); k_len * 2^-24 the fp32
    accumulation (as in direct_error_bound). Assumes zero-mean random weights, as in the
    tests; a near-zero max|ref| (cancelling data) makes any relative check meaningless.
    `elementwise_bound` is tighter (adapts to data and tile position), has no heavy tail,
    and is the one to prefer in kernel tests.
    """
    return U16 * (1 + SAFETY * noise_gain(m)) + k_len * U32


def expected_error(m: int) -> float:
    """The max|err| / max|ref| a real layer shows with F(m,3): the output rounding plus the worst tile
    position's V/U rounding error, without the small-output safety factor of error_bound. The build
    compares this with its tolerance to accept or reject a tile (docs/winograd-numerics.md: measured
    at most 1.45 u for F(2,3) and 20.7 u for F(4,3) over the table; this gives 2.0 u and 19.9 u)."""
    return U16 * (1 + noise_gain(m))


def direct_error_bound(k_len: int) -> float:
    """The same metric for direct convolution (fp16 products exact, fp32 accumulation,
    one fp16 rounding): 2^-11 + k_len * 2^-24. Measured: at most 0.87 * 2^-11."""
    return U16 + k_len * U32


def elementwise_bound(x16, w16, m: int, pads, ref: np.ndarray) -> np.ndarray:
    """Per-element tolerance for the kernel's fp16 output y against `ref` (float64, from
    the same fp16 inputs, bias included): |y - ref| <= this. Output rounding (2^-11 |ref|)
    + Z_SIGMA standard deviations of the V/U rounding error + fp16's subnormal spacing."""
    return U16 * np.abs(ref) + Z_SIGMA * error_sigma(x16, w16, m, pads) + U32
