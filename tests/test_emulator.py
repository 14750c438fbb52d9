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
    core.vbinary("add", tz, tx, ty, repeat=2, mask=100)  # 100 of 128 lanes in each of 2 repeats
    z = core.peek(tz)
    lanes = np.arange(256) % 128 < 100
    np.testing.assert_array_equal(z[lanes], (x + y)[lanes])
    np.testing.assert_array_equal(z[~lanes], 0)
    assert core.stats()["vector_repeats"] == 2


def test_vector_operand_out_of_range():
    core = kiln.Core("ascend910b", "AIV", label="vk")
    t = core.alloc("UB", 128, name="small")
    with pytest.raises(kiln.BoundsError, match=r"'vk'.*small"):
        core.vbinary("add", t, t, t, repeat=2)
