"""batched_gemm_cube: a batch of GEMMs of one shape (attention's Q.K^T and P.V when unfused) on the Cube, an
M x N tile of one batch entry per block (templates/batched_gemm_cube.cpp.j2)."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.blocks import cube_drain, cube_k_loop, rows_load2d
from ..cost.model import Prediction, SimCore, launch
from ..ir.opspec import BatchedGemmSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, fits, r16, register
from .gemm_cube import gemm_wide_space
from .ranking import cube_grid


def bgemm_buffers(spec: BatchedGemmSpec, base_m: int, base_n: int, base_k1: int, k1_step: int) -> dict[str, int]:
    return {
        "L1": 2 * k1_step * (base_m // 16) * 512 + 2 * k1_step * (base_n // 16) * 512,
        "L0A": 2 * (base_m // 16) * base_k1 * 512,
        "L0B": 2 * base_k1 * (base_n // 16) * 512,
        "L0C": (base_m // 16) * (base_n // 16) * 1024,
    }


def bgemm_rule(spec: BatchedGemmSpec, profile: Profile, log: OptLog) -> Variant:
    K1 = c1(spec.k)
    base_m, base_n, base_k1 = min(128, r16(spec.m)), min(256, r16(spec.n)), min(4, K1)
    k1_step = None
    for s in range(ceil(K1 / base_k1) * base_k1, 0, -base_k1):
        if fits(profile, bgemm_buffers(spec, base_m, base_n, base_k1, s)) is None:
            k1_step = s
            break
    if k1_step is None:
        raise KilnError("tiling", spec.name, f"no K step fits L1 of {profile.name}")
    blocks = spec.batch * ceil(spec.m / base_m) * ceil(spec.n / base_n)
    p = dict(base_m=base_m, base_n=base_n, base_k1=base_k1, k1_step=k1_step)
    return Variant("batched_gemm_cube", p, blocks, bgemm_buffers(spec, base_m, base_n, base_k1, k1_step))


def bgemm_mte2(spec: BatchedGemmSpec, v: Variant) -> int:
    p, K1, total = v.params, c1(spec.k), 0
    for m0 in range(0, spec.m, p["base_m"]):
        m = min(p["base_m"], spec.m - m0)
        for n0 in range(0, spec.n, p["base_n"]):
            n = min(p["base_n"], spec.n - n0)
            for k1a in range(0, K1, p["k1_step"]):
                cols = min(p["k1_step"] * 16, spec.k - k1a * 16)
                total += m * cols * 2 + n * cols * 2
    return total * spec.batch


def replay_bgemm(spec, params: dict, profile: Profile) -> Prediction:
    bm, bn, bk1, step = params["base_m"], params["base_n"], params["base_k1"], params["k1_step"]
    K1 = ceil(spec.k / 16)
    m_tiles, n_tiles = ceil(spec.m / bm), ceil(spec.n / bn)

    def block(core: SimCore, b: int) -> None:
        ni, mi = b % n_tiles, (b // n_tiles) % m_tiles
        m = min(bm, spec.m - mi * bm)
        n = min(bn, spec.n - ni * bn)
        n1 = ceil(n / 16)
        if core.blocks > 0:
            core.wait_flag("FIX", "M", 0)
        chunks = []
        for k1a in range(0, K1, step):
            k1n = min(step, K1 - k1a)
            cols = min(k1n * 16, spec.k - k1a * 16)
            chunks.append((k1n, [(1, m * cols, 0), (1, n * cols, 1)]))
        if spec.trans_b:
            b_loads = lambda kc, k1n: [kc * n1]  # noqa: E731
        else:
            b_loads = lambda kc, k1n: [n1] * kc  # noqa: E731  one transposing load per ZN row
        cube_k_loop(core, m, n1 * 16, chunks, bk1, (rows_load2d(core, m), b_loads))
        cube_drain(core, m * n)

    return launch(profile, "cube", spec.batch * m_tiles * n_tiles, block)


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return cube_grid(spec, spec.m, c1(spec.n) * 16, c1(spec.k), bgemm_buffers, profile)


FAMILY = register(Family("batched_gemm_cube", "bgemm", "cube", bgemm_rule, bgemm_mte2, replay_bgemm, space=space,
                wide_space=gemm_wide_space("batched_gemm_cube", bgemm_buffers, lambda spec: ceil(spec.n / 16) * 16)))
