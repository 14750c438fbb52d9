"""The stride-phase decomposition of ConvTranspose (codegen/ir/conv_transpose.py) against the definition: a NumPy
scatter (y[oh] += x[ih] w[kh] at oh = ih s - pad + kh d) equals the phase convolutions interleaved, for kernels
1..4, strides 1..3, dilations 1..2, pads 0..2, output_padding, groups 1 and 2; every shape the frontend accepts
(problem() says "") is covered and the refused ones are named. And the pads resolution as ONNX Runtime does it."""
import itertools

import numpy as np
import pytest

from codegen.ir.conv_transpose import phase_weight, phases, problem, resolve


def scatter(x, w, s, d, pads, out_hw, group):
    """ConvTranspose by its definition (ONNX)."""
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // group
    y = np.zeros((n, cog * group, *out_hw))
    for g, ih, iw, a, b in itertools.product(range(group), range(h), range(wd), range(kh), range(kw)):
        oh, ow = ih * s[0] - pads[0] + a * d[0], iw * s[1] - pads[1] + b * d[1]
        if 0 <= oh < out_hw[0] and 0 <= ow < out_hw[1]:
            xg, wg = x[:, g * cig:(g + 1) * cig, ih, iw], w[g * cig:(g + 1) * cig, :, a, b]
            y[:, g * cog:(g + 1) * cog, oh, ow] += xg @ wg
    return y


def conv(x, w, pads, dil, group):
    """A stride-1 grouped correlation (ONNX Conv) with non-negative pads."""
    co, cig, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    ho, wo = xp.shape[2] - dil[0] * (kh - 1), xp.shape[3] - dil[1] * (kw - 1)
    y = np.zeros((x.shape[0], co, ho, wo))
    cog = co // group
    for g, a, b in itertools.product(range(group), range(kh), range(kw)):
        win = xp[:, g * cig:(g + 1) * cig, a * dil[0]:a * dil[0] + ho, b * dil[1]:b * dil[1] + wo]
        y[:, g * cog:(g + 1) * cog] += np.einsum("nchw,oc->nohw", win, w[g * cog:(g + 1) * cog, :, a, b])
    return y


def test_phases_equal_the_definition():
    rng = np.random.default_rng(0)
    checked = refused = 0
    for k, s, d, p, op, group in itertools.product((1, 2, 3, 4), (1, 2, 3), (1, 2), (0, 1, 2), (0, 1), (1, 2)):
        if op >= s:
            continue
        x = rng.standard_normal((1, 4, 4, 5))
        w = rng.standard_normal((4, 3, k, k))
        try:
            pads, out = resolve((4, 5), (k, k), (s, s), (d, d), (op, op), ("NOTSET", (p, p, p, p), ()))
        except ValueError:
            continue
        rows = phases(4, k, s, d, pads[0], out[0])
        cols = phases(5, k, s, d, pads[1], out[1])
        if any(problem(ph, "H") for ph in rows) or any(problem(ph, "W") for ph in cols):
            refused += 1
            continue
        y = np.zeros((1, 3 * group, *out))
        for ph, pw in itertools.product(rows, cols):
            if ph.count and pw.count:
                part = conv(x, phase_weight(w, group, ph.taps, pw.taps),
                            (ph.pad_begin, pw.pad_begin, ph.pad_end, pw.pad_end), (ph.dilation, pw.dilation), group)
                assert part.shape[2:] == (ph.count, pw.count)
                y[:, :, ph.phase::s, pw.phase::s] = part
        np.testing.assert_allclose(y, scatter(x, w, (s, s), (d, d), pads, out, group), atol=1e-9)
        checked += 1
    assert (checked, refused) == (90, 146)  # the refused: a phase no tap reaches, or one needing negative pads


@pytest.mark.parametrize("auto_pad, output_shape, pads", [
    ("SAME_UPPER", (), (0, 0, 1, 1)),   # total padding 1 (kernel 3, stride 2): the odd pixel at the end
    ("SAME_LOWER", (), (1, 1, 0, 0)),   # ... at the beginning
    ("NOTSET", (10, 13), (1, 0, 0, 0)),  # output_shape: total (1, 0), the odd pixel first
    ("SAME_UPPER", (10, 13), (0, 0, 1, 0)),
    ("VALID", (), (0, 0, 0, 0)),
])
def test_resolve_pads_as_onnxruntime(auto_pad, output_shape, pads):
    got, out = resolve((5, 6), (3, 3), (2, 2), (1, 1), (0, 0), (auto_pad, (2, 2, 2, 2), output_shape))
    assert got == pads
    assert out == (output_shape or ((11, 13) if auto_pad == "VALID" else (10, 12)))


def test_resolve_refuses_negative_padding():
    with pytest.raises(ValueError, match="negative padding"):
        resolve((5, 6), (3, 3), (2, 2), (1, 1), (0, 0), ("NOTSET", (0, 0, 0, 0), (14, 14)))
