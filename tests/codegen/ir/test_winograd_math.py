"""Winograd F(2x2,3x3) / F(4x4,3x3) math (codegen.ir.winograd): the transforms are exact, the
Vector programs reproduce them, and the NumPy model of the kernel's numerics stays within
the tolerances derived in docs/winograd-numerics.md. Pure NumPy, no build needed."""

import numpy as np
import pytest

from codegen.ir import winograd as wg

U = 2.0 ** -11


def ref_conv(x, w, bias=None, pads=(0, 0, 0, 0)):
    """float64 3x3 stride-1 correlation, written independently of the module: 9 shifted taps."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    pt, pl, pb, pr = pads
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho, wo = xp.shape[2] - 2, xp.shape[3] - 2
    y = sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + ho, j:j + wo], w[:, :, i, j]) for i in range(3) for j in range(3))
    return y if bias is None else y + np.asarray(bias, np.float64)[None, :, None, None]


def fp16_data(seed, n, cin, cout, h, w, bias=True):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, h, w)).astype(np.float16)
    wt = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (cin * 9))).astype(np.float16)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    return x, wt, b


def test_tiles():
    for m, t in wg.TILES.items():
        assert wg.tile(m) is t and (t.m, t.r, t.alpha) == (m, 3, m + 2)
        assert t.BT.shape == (m + 2, m + 2) and t.G.shape == (m + 2, 3) and t.AT.shape == (m, m + 2)
        assert t.BT.dtype == t.G.dtype == t.AT.dtype == np.float64
    for bad in (5, 3, 6, "4"):
        with pytest.raises(ValueError, match="2, 4"):
            wg.tile(bad)


@pytest.mark.parametrize("m", [2, 4])
def test_1d_transform_is_exact_correlation(m):
    """AT [(G g) * (BT d)] is the valid correlation of d with g, for any d and g."""
    t = wg.tile(m)
    rng = np.random.default_rng(m)
    for _ in range(5):
        d, g = rng.standard_normal(t.alpha), rng.standard_normal(3)
        want = np.array([d[i:i + 3] @ g for i in range(m)])
        np.testing.assert_allclose(t.AT @ ((t.G @ g) * (t.BT @ d)), want, rtol=0, atol=1e-13)


def test_transform_weights_layout():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float16)
    for m in (2, 4):
        t = wg.tile(m)
        u = wg.transform_weights(w, m)
        assert u.shape == (t.alpha ** 2, 5, 3) and u.dtype == np.float64
        for o, c in ((0, 0), (4, 2), (2, 1)):
            full = t.G @ w[o, c].astype(np.float64) @ t.G.T
            for i in range(t.alpha):
                for j in range(t.alpha):
                    assert u[i * t.alpha + j, o, c] == pytest.approx(full[i, j], rel=1e-14, abs=1e-15)
    with pytest.raises(ValueError):
        wg.transform_weights(np.zeros((2, 2, 5, 5)), 2)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("n,cin,cout,h,w,pads", [
    (1, 3, 5, 7, 9, (1, 1, 1, 1)),
    (2, 4, 3, 19, 19, (0, 0, 0, 0)),
    (1, 2, 2, 13, 10, (0, 1, 2, 0)),
    (1, 1, 1, 3, 3, (0, 0, 0, 0)),   # a single output, inside one partial tile
    (1, 2, 3, 4, 6, (2, 1, 0, 3)),
])
def test_float64_winograd_equals_direct(m, n, cin, cout, h, w, pads):
    rng = np.random.default_rng(h * w + m)
    x, wt, b = rng.standard_normal((n, cin, h, w)), rng.standard_normal((cout, cin, 3, 3)), rng.standard_normal(cout)
    want = ref_conv(x, wt, b, pads)
    got = wg.conv2d_winograd_exact(x, wt, b, m, pads)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-10 * np.abs(want).max()
    np.testing.assert_allclose(wg.conv2d_direct(x, wt, b, pads), want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_linear_program_reproduces_matrix():
    rng = np.random.default_rng(2)
    r = rng.standard_normal((4, 7)) * (rng.random((4, 7)) < 0.5)
    r[2] = 0  # an all-zero row stays, with no terms
    mats = [r] + [getattr(t, k) for t in wg.TILES.values() for k in ("BT", "G", "AT")]
    for mat in mats:
        prog = wg.linear_program(mat)
        assert [row for row, _ in prog] == list(range(mat.shape[0]))
        back = np.zeros_like(mat)
        for row, terms in prog:
            cols = [c for c, _ in terms]
            assert cols == sorted(cols) and all(coef != 0 and isinstance(coef, float) for _, coef in terms)
            for col, coef in terms:
                back[row, col] = coef
        np.testing.assert_array_equal(back, mat)
    assert wg.linear_program(wg.tile(2).BT)[0] == (0, [(0, 1.0), (2, -1.0)])


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("n,cin,cout,h,w,pads", [
    (1, 3, 5, 7, 9, (1, 1, 1, 1)),        # odd size, channels far from 16
    (1, 20, 24, 11, 13, (0, 0, 0, 0)),    # padding 0, Cin=20
    (2, 16, 20, 19, 19, (1, 1, 1, 1)),    # the 19x19 case: partial last tiles for both m
    (1, 16, 20, 13, 10, (0, 1, 1, 0)),    # asymmetric padding
    (1, 8, 4, 6, 6, (1, 1, 1, 1)),
])
def test_emulated_kernel_within_bounds(m, n, cin, cout, h, w, pads):
    x, wt, b = fp16_data(n * 1000 + h * w + cin, n, cin, cout, h, w)
    want = ref_conv(x, wt, b, pads)
    y32 = wg.conv2d_winograd_emulated(x, wt, b, m, pads)
    y16 = wg.conv2d_winograd_emulated(x, wt, b, m, pads, round_output=True)
    assert y32.dtype == np.float32 and y16.dtype == np.float16 and y16.shape == want.shape
    np.testing.assert_array_equal(y16, y32.astype(np.float16))
    err = np.abs(y16.astype(np.float64) - want)
    assert err.max() <= wg.error_bound(m, cin * 9) * np.abs(want).max()
    assert np.all(err <= wg.elementwise_bound(x, wt, m, pads, want))
    # and it really is the rounded pipeline, not exact arithmetic
    assert np.abs(y32 - want).max() > 0.05 * U * np.abs(want).max()


def test_direct_within_its_bound():
    x, wt, _ = fp16_data(3, 1, 20, 24, 11, 13, bias=False)
    want = ref_conv(x, wt)
    y = wg.conv2d_direct(x.astype(np.float32), wt.astype(np.float32), None, (0, 0, 0, 0), np.float32).astype(np.float16)
    assert np.abs(y - want).max() <= wg.direct_error_bound(20 * 9) * np.abs(want).max()


def test_error_size_matches_rounding_model():
    """RMS error over a layer is close to the model's prediction (noise_gain is its worst tile
    position; the mean over positions of f(i) gives the RMS); the z-scores look Gaussian."""
    x, wt, _ = fp16_data(4, 1, 32, 32, 16, 16, bias=False)
    want = ref_conv(x, wt, None, (1, 1, 1, 1))
    for m, rms_model in ((2, 1.0), (4, 6.4)):
        y = wg.conv2d_winograd_emulated(x, wt, None, m, (1, 1, 1, 1))
        rms = np.sqrt(((y - want) ** 2).sum() / (want ** 2).sum()) / U
        assert 0.7 * rms_model < rms < 1.3 * rms_model
        z = np.abs(y - want) / wg.error_sigma(x, wt, m, (1, 1, 1, 1))
        assert 2.5 < z.max() < wg.Z_SIGMA and 0.5 < np.sqrt((z ** 2).mean()) < 1.2


def test_error_bound_formula():
    assert wg.noise_gain(2) == pytest.approx(1.0, rel=0.01)
    assert wg.noise_gain(4) == pytest.approx(18.87, rel=0.01)
    for k in (27, 576, 4608):
        assert wg.direct_error_bound(k) < wg.error_bound(2, k) < wg.error_bound(4, k)
        assert wg.error_bound(2, k) == pytest.approx(U * (1 + wg.SAFETY * wg.noise_gain(2)) + k * 2.0 ** -24)
    assert wg.error_bound(4, 576) < 0.06  # still catches structural bugs (O(1) errors)
    with pytest.raises(ValueError):
        wg.error_bound(6, 27)


def test_bad_arguments():
    x = np.zeros((1, 3, 5, 5), np.float16)
    with pytest.raises(ValueError):
        wg.conv2d_winograd_emulated(x, np.zeros((2, 4, 3, 3), np.float16), None, 2, (0, 0, 0, 0))
    with pytest.raises(ValueError):
        wg.conv2d_winograd_emulated(x, np.zeros((2, 3, 3, 3), np.float16), np.zeros(3), 2, (0, 0, 0, 0))
    with pytest.raises(ValueError):
        wg.conv2d_winograd_emulated(x[:, :, :1, :1], np.zeros((2, 3, 3, 3), np.float16), None, 2, (0, 0, 0, 0))
    with pytest.raises(ValueError):
        wg.conv2d_winograd_emulated(x, np.zeros((2, 3, 3, 3), np.float16), None, 3, (0, 0, 0, 0))
