"""The emulation layer driven one instruction at a time through kiln.Core:
buffer capacities and alignment per profile, flags, Cube fractal semantics,
Vector masks and the pipe counters."""
import numpy as np
import pytest

import kiln


def test_capacity_overflow_names_kernel_and_buffer():
    core = kiln.Core("ascend910b", "AIC", label="my_kernel")
    assert core.capacity("L0A") == 64 * 1024
    core.alloc("L0A", 16 * 1024, name="a_ping")  # 32 KB of fp16
    with pytest.raises(kiln.CapacityError, match=r"my_kernel.*L0A overflow.*'a_pong'.*capacity 65536"):
        core.alloc("L0A", 16 * 1024 + 1, name="a_pong")


def test_profiles_have_their_own_capacities():
    assert kiln.Core("ascend310p", "AIC").capacity("L0C") == 256 * 1024
    assert kiln.Core("ascend910b", "AIC").capacity("L0C") == 128 * 1024
    # 910B splits Cube and Vector cores: a Cube core has no UB.
    with pytest.raises(kiln.CapacityError, match="UB does not exist"):
        kiln.Core("ascend910b", "AIC").alloc("UB", 16)
    assert kiln.Core("ascend310p", "AIC").capacity("UB") == 256 * 1024


def test_misaligned_operand_raises():
    core = kiln.Core("ascend910b", "AIC", label="k")
    l1 = core.alloc("L1", 256, name="l1")
    bad = core.at("L0A", 32, 256, name="a_misaligned")  # L0A wants 512-byte alignment
    with pytest.raises(kiln.AlignmentError, match=r"'k'.*a_misaligned.*L0A byte 32.*512-byte"):
        core.load2d(bad, l1, repeat=1)


def test_wait_without_set_is_a_hang():
    core = kiln.Core()
    with pytest.raises(kiln.SyncError, match="never set"):
        core.wait_flag("MTE2", "MTE1", 0)


def pack_zz(a):  # [M,K] -> L0A fractals (M1, K1, 16, 16)
    m, k = a.shape
    return a.reshape(m // 16, 16, k // 16, 16).transpose(0, 2, 1, 3).reshape(-1)


def pack_zn(b):  # [K,N] -> L0B fractals (K1, N1, 16 n, 16 k)
    k, n = b.shape
    return b.reshape(k // 16, 16, n // 16, 16).transpose(0, 2, 3, 1).reshape(-1)


def unpack_nz(c, m, n):  # L0C (N1, M1, 16, 16) -> [M,N]
    return c.reshape(n // 16, m // 16, 16, 16).transpose(1, 2, 0, 3).reshape(m, n)


def test_mmad_fractals_and_counters():
    rng = np.random.default_rng(0)
    m, k, n = 32, 48, 16
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    core = kiln.Core()
    a1, b1 = core.alloc("L1", m * k, name="a1"), core.alloc("L1", k * n, name="b1")
    a0, b0 = core.alloc("L0A", m * k, name="a0"), core.alloc("L0B", k * n, name="b0")
    c = core.alloc("L0C", m * n, "float32", name="c")
    core.copy_in(a1, pack_zz(a))
    core.copy_in(b1, pack_zn(b))
    core.set_flag("MTE2", "MTE1", 0)
    core.wait_flag("MTE2", "MTE1", 0)
    core.load2d(a0, a1, repeat=m * k // 256)
    core.load2d(b0, b1, repeat=k * n // 256)
    core.set_flag("MTE1", "M", 0)
    core.wait_flag("MTE1", "M", 0)
    core.mmad(c, a0, b0, m, n, k, init=True)
    core.mmad(c, a0, b0, m, n, k, init=False)  # accumulate: C = 2AB
    got = unpack_nz(core.peek(c), m, n)
    want = 2 * (a.astype(np.float64) @ b.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    st = core.stats()
    assert st["cube_macs"] == 2 * m * n * k
    assert st["pipes"]["MTE2"]["bytes"] == (m * k + k * n) * 2
    assert st["pipes"]["MTE1"]["bytes"] == (m * k + k * n) * 2
    # Flags order the pipes: mmad starts after the loads, loads after the copies.
    assert st["cycles"] >= st["pipes"]["MTE2"]["busy_cycles"] + st["pipes"]["M"]["busy_cycles"]


def test_vector_mask_and_repeats():
    core = kiln.Core("ascend910b", "AIV")
    x = np.arange(256, dtype=np.float16)
    y = np.full(256, 2, np.float16)
    tx, ty, tz = (core.alloc("UB", 256, name=n) for n in ("x", "y", "z"))
    core.copy_in(tx, x)
    core.copy_in(ty, y)
    core.copy_in(tz, np.zeros(256, np.float16))
    core.vector("add", tz, tx, ty, repeat=2, mask=100)  # 100 of 128 lanes in each of 2 repeats
    z = core.peek(tz)
    lanes = np.arange(256) % 128 < 100
    np.testing.assert_array_equal(z[lanes], (x + y)[lanes])
    np.testing.assert_array_equal(z[~lanes], 0)
    assert core.stats()["vector_repeats"] == 2


def test_vector_operand_out_of_range():
    core = kiln.Core("ascend910b", "AIV", label="vk")
    t = core.alloc("UB", 128, name="small")
    with pytest.raises(kiln.BoundsError, match=r"'vk'.*small"):
        core.vector("add", t, t, t, repeat=2)


def ub_core():
    return kiln.Core("ascend910b", "AIV", label="vec")


F32_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("op", sorted(F32_BINARY))
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_vector_binary_ops(op, dtype):
    rng = np.random.default_rng(1)
    n = 256 if dtype == "float16" else 128  # two repeats
    x, y = (rng.standard_normal(n).astype(dtype) for _ in range(2))
    core = ub_core()
    tx, ty, tz = (core.alloc("UB", n, dtype, name=v) for v in "xyz")
    core.copy_in(tx, x)
    core.copy_in(ty, y)
    core.vector(op, tz, tx, ty, repeat=2)
    want = F32_BINARY[op](x.astype(np.float32), y.astype(np.float32)).astype(dtype)
    np.testing.assert_array_equal(core.peek(tz), want)
    st = core.stats()["pipes"]["V"]
    assert st["instructions"] == 1 and st["bytes"] == 512


def test_vector_unary_scalar_reduce_and_cast():
    rng = np.random.default_rng(2)
    x = rng.standard_normal(64).astype(np.float32)
    core = ub_core()
    tx, ty = core.alloc("UB", 64, "float32", "x"), core.alloc("UB", 64, "float32", "y")
    core.copy_in(tx, x)
    core.vector("relu", ty, tx)
    np.testing.assert_array_equal(core.peek(ty), np.maximum(x, 0))
    core.vector("exp", ty, tx)
    np.testing.assert_allclose(core.peek(ty), np.exp(x), rtol=1e-6)
    core.vector("muls", ty, tx, scalar=3.0)
    np.testing.assert_array_equal(core.peek(ty), x * np.float32(3))
    core.vector("dup", ty, tx, scalar=1.5, mask=10)
    assert np.all(core.peek(ty)[:10] == 1.5)
    r = core.alloc("UB", 8, "float32", "r")
    core.vector("reduce_sum", r, tx, mask=64)
    np.testing.assert_allclose(core.peek(r)[0], x.sum(), rtol=1e-5)
    core.vector("reduce_max", r, tx)
    assert core.peek(r)[0] == x.max()
    # fp32 -> fp16: one repeat covers 64 values, the fp16 side steps 4 blocks per repeat
    h = core.alloc("UB", 64, "float16", "h")
    core.vector("cast", h, tx)
    np.testing.assert_array_equal(core.peek(h), x.astype(np.float16))
    back = core.alloc("UB", 64, "float32", "back")
    core.vector("cast", back, h)
    np.testing.assert_array_equal(core.peek(back), x.astype(np.float16).astype(np.float32))


def test_vector_strides_broadcast_a_block():
    """Block stride 0 on a source reads the same 32 bytes for every block of the repeat."""
    core = ub_core()
    x = np.arange(128, dtype=np.float16)
    w = np.arange(16, dtype=np.float16)
    tx, tw, tz = core.alloc("UB", 128, name="x"), core.alloc("UB", 16, name="w"), core.alloc("UB", 128, name="z")
    core.copy_in(tx, x)
    core.copy_in(tw, w)
    core.vector("mul", tz, tx, tw, strides={"src1_blk": 0, "src1_rep": 0})
    np.testing.assert_array_equal(core.peek(tz), x * np.tile(w, 8))


def test_bf16_mmad():
    rng = np.random.default_rng(4)
    m = n = k = 16
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    core = kiln.Core()
    a1, b1 = core.alloc("L1", 256, "bfloat16", "a1"), core.alloc("L1", 256, "bfloat16", "b1")
    a0, b0 = core.alloc("L0A", 256, "bfloat16", "a0"), core.alloc("L0B", 256, "bfloat16", "b0")
    c = core.alloc("L0C", 256, "float32", "c")
    core.copy_in(a1, pack_zz(a))
    core.copy_in(b1, pack_zn(b))
    core.load2d(a0, a1, 1)
    core.load2d(b0, b1, 1)
    core.mmad(c, a0, b0, m, n, k)
    abf = core.peek(a1).reshape(16, 16).astype(np.float64)  # bf16-rounded values
    bbf = core.peek(b1).reshape(16, 16).T.astype(np.float64)  # ZN fractal is [n][k]
    assert np.abs(abf - a).max() > 0  # bf16 really rounds
    np.testing.assert_allclose(unpack_nz(core.peek(c), m, n), abf @ bbf, rtol=1e-5, atol=1e-5)


def test_fixpipe_to_ub_only_on_coupled_profiles():
    for profile, ok in (("ascend310p", True), ("ascend910b", False)):
        core = kiln.Core(profile, "AIC", label="epi")
        if not ok:
            with pytest.raises(kiln.CapacityError, match="UB does not exist"):
                core.alloc("UB", 256, "float32", "u")
            continue
        c, u = core.alloc("L0C", 256, "float32", "c"), core.alloc("UB", 256, "float32", "u")
        a0, b0 = core.alloc("L0A", 256, name="a"), core.alloc("L0B", 256, name="b")
        a1, b1 = core.alloc("L1", 256, name="a1"), core.alloc("L1", 256, name="b1")
        rng = np.random.default_rng(3)
        a, b = rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 16)).astype(np.float16)
        core.copy_in(a1, pack_zz(a))
        core.copy_in(b1, pack_zn(b))
        core.load2d(a0, a1, 1)
        core.load2d(b0, b1, 1)
        core.mmad(c, a0, b0, 16, 16, 16)
        core.fixpipe_to_ub(u, c, 256, relu=True)
        want = np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)
        np.testing.assert_allclose(unpack_nz(core.peek(u), 16, 16), want, rtol=1e-5, atol=1e-5)
        assert (core.peek(u) == 0).any() and core.stats()["pipes"]["FIX"]["bytes"] == 1024


@pytest.mark.parametrize("call", [
    lambda c: c.alloc("UB", 2 ** 63, name="huge"),
    lambda c: c.alloc("UB", 2 ** 62, "float32", name="huge32"),
    lambda c: c.at("UB", 2 ** 64 - 64, 32, name="wrapped"),
    lambda c: c.at("UB", 0, 2 ** 62, name="long"),
])
def test_absurd_sizes_are_capacity_errors_not_crashes(call):
    with pytest.raises(kiln.CapacityError):
        call(kiln.Core("ascend910b", "AIV"))


def test_absurd_strides_are_errors_not_crashes():
    core = kiln.Core("ascend910b", "AIV")
    h = core.alloc("UB", 256, name="h")
    with pytest.raises(kiln.EmulationError):
        core.vector("dup", h, h, repeat=255, strides={"dst_rep": 255})
    aic = kiln.Core("ascend910b", "AIC")
    src, dst = aic.alloc("L1", 512, name="src"), aic.alloc("L0A", 512, name="dst")
    with pytest.raises(kiln.EmulationError):
        aic.load2d(dst, src, repeat=2, src_stride=2 ** 56 - 1)
