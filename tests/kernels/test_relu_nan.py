"""ReLU keeps NaN (kernels/kiln/simd.hpp, core.cpp; docs/numerics.md): as ONNX Relu, max(0, x), whose reference
propagates NaN. The Vector unit's relu, the Fixpipe's ReLU on the way out of L0C, and baked kernels with a fused
ReLU; negative values still become 0."""
import numpy as np
import pytest

import kiln

VALUES = [np.nan, -1.0, 2.0, -np.inf, np.inf, -0.5, 0.0, 3.0]


@pytest.mark.parametrize("dtype, lanes", [("float32", 64), ("float16", 128)])
def test_vector_relu_keeps_nan(dtype, lanes):
    x = np.resize(np.array(VALUES, dtype), lanes)
    core = kiln.Core("ascend910b", "AIV", label="relu")
    tx, ty = core.alloc("UB", lanes, dtype, "x"), core.alloc("UB", lanes, dtype, "y")
    core.copy_in(tx, x)
    core.vector("relu", ty, tx)
    np.testing.assert_array_equal(core.peek(ty), np.maximum(x, 0))  # equal_nan: NaN where x is NaN
    assert np.isnan(core.peek(ty)).sum() == np.isnan(x).sum()


def test_fixpipe_relu_keeps_nan():
    """L0C -> UB with ReLU (a coupled profile): a NaN accumulator stays NaN."""
    core = kiln.Core("ascend310p", "AIC", label="epi")
    c, u = core.alloc("L0C", 256, "float32", "c"), core.alloc("UB", 256, "float32", "u")
    a0, b0 = core.alloc("L0A", 256, name="a"), core.alloc("L0B", 256, name="b")
    a1, b1 = core.alloc("L1", 256, name="a1"), core.alloc("L1", 256, name="b1")
    a = np.resize(np.array(VALUES, np.float16), 256)  # fractal order does not matter: every row meets a NaN
    core.copy_in(a1, a)
    core.copy_in(b1, np.ones(256, np.float16))
    core.load2d(a0, a1, 1)
    core.load2d(b0, b1, 1)
    core.mmad(c, a0, b0, 16, 16, 16)
    core.fixpipe_to_ub(u, c, 256, relu=True)
    nan = np.isnan(core.peek(c))
    assert nan.any()
    np.testing.assert_array_equal(np.isnan(core.peek(u)), nan)  # exactly the accumulators that were NaN


def _relu_kernels():
    """The smallest baked kernel with a fused ReLU per family, and the standalone Relu (eltwise)."""
    best: dict[str, kiln.Kernel] = {}
    for k in kiln.kernels():
        s = k.spec
        fused = s.get("relu") and not s.get("clip_hi") and not s.get("mid") and not s.get("cin2") \
            and not s.get("residual")
        if fused or s.get("op") == "relu" or s.get("act") == "relu":
            size = k.record["output"]["shape"]
            if k.family not in best or np.prod(size) < np.prod(best[k.family].record["output"]["shape"]):
                best[k.family] = k
    return list(best.values())


def _natural_args(k: kiln.Kernel, nan_first: bool) -> list[np.ndarray]:
    from kiln.operands import ANY_SHAPE, natural_shapes
    args = []
    for i, (_, shape) in enumerate(natural_shapes(k.record)):
        size = int(np.prod(k.record["inputs"][i]["shape"])) if shape == ANY_SHAPE else None
        a = np.full(size if size else shape, 0.25 if i else -1.0, np.float32)  # data -1: ReLU gives 0
        if i == 0 and nan_first:
            a.flat[0] = np.nan
        args.append(a)
    return args


@pytest.mark.parametrize("k", _relu_kernels(), ids=lambda k: k.name)
def test_baked_kernels_with_relu_keep_nan(k, monkeypatch):
    from kiln import numerics
    monkeypatch.setattr(numerics, "_warned", set())  # said once per process: this test's call says it
    clean = np.asarray(k(*_natural_args(k, nan_first=False)), np.float32)
    assert not np.isnan(clean).any()
    with pytest.warns(kiln.NumericsWarning, match=rf"kernel {k.name}, argument '\w+': 1 non-finite value"):
        got = np.asarray(k(*_natural_args(k, nan_first=True)), np.float32)  # the NaN is the point: said, run
    assert np.isnan(got).any(), f"{k.name}: one NaN in the input, no NaN out (ReLU mapped it to 0)"
    assert (got[~np.isnan(got)] >= 0).all()
