"""attention_flash: fused attention (FlashAttention-2 online softmax); on ascend910b one Cube core and its two
Vector cores per group, on coupled profiles one core (templates/attention_flash.cpp.j2)."""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.model import WORKSPACE, CrossFlagSim, Prediction, SimCore, launch_group
from ..ir.opspec import AttentionSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, fits, predicted_cycles, r16, r32, register

ATTENTION_TILES = (16, 32, 64, 128)  # q rows per block, kv rows per tile (and 256 for kv)


def attention_buffers(d: int, base_q: int, base_kv: int, on_chip: bool = False) -> dict[str, int]:
    """Bytes per buffer of attention_flash's tiles: on the Cube side Q, K, V and P in L1, Q and P in L0A, K and V
    in L0B, S and P.V in L0C; on the Vector side the score tile (fp32) and P (fp16) with rows padded to whole
    repeats, the row fold, the output accumulator and P.V (fp32), the fp16 output, six per-row vectors, a mask
    row, and
    on_chip (coupled profiles) two S and two P.V tiles as Fixpipe drains them into UB."""
    d16, kvp = c1(d) * 16, ceil(base_kv / 64) * 64
    nz = 2 * (base_q * base_kv + base_q * d16) * 4 if on_chip else 0
    return {
        "L1": (base_q * d16 + 2 * base_kv * d16 + base_q * base_kv) * 2,
        "L0A": (base_q * d16 + base_q * base_kv) * 2,
        "L0B": 2 * base_kv * d16 * 2,
        "L0C": (base_q * base_kv + base_q * d16) * 4,
        "UB": (r32(base_q * kvp * 4) + r32(base_q * kvp * 2) + r32(base_q * 64 * 4) + 2 * r32(base_q * d16 * 4)
               + r32(base_q * d16 * 2) + 6 * r32(base_q * 4) + nz
               + r32(kvp * 2) + r32(kvp * 4)),  # a mask row (fp16, widened), if the kernel has one
    }


def attention_capacity_problem(d: int, profile: Profile) -> str:
    """Why even the smallest attention_flash tile (16 q rows, 16 kv rows) does not fit the profile, or ''."""
    bufs = attention_buffers(d, 16, 16, profile.coupled)
    over = fits(profile, bufs)
    if over is None:
        return ""
    return (f"head dim {d}: the smallest tile needs {bufs[over]} B of {over}, {profile.name} has "
            f"{profile.capacity[over]} B")


def attention_rule(spec: AttentionSpec, profile: Profile, log: OptLog) -> Variant:
    """Every (q tile, kv tile) that fits the buffers, ranked by the cost model's cycles (fewer blocks than Cube
    cores leave cores idle; longer kv tiles mean fewer handovers but larger Vector passes)."""
    problem = attention_capacity_problem(spec.d, profile)
    if problem:
        raise KilnError("tiling", spec.name, problem)
    cands = []
    for bq in ATTENTION_TILES:
        if bq > r16(spec.q) and bq > 16:
            continue
        for bkv in ATTENTION_TILES + (256,):
            if (bkv > r16(spec.kv) and bkv > 16) or fits(profile, attention_buffers(spec.d, bq, bkv,
                                                                                      profile.coupled)):
                continue
            # coupled: S and P.V stay on chip; split (910B): the rows go over the Cube core's two Vector cores
            p = {"base_q": bq, "base_kv": bkv, **({"on_chip": 1} if profile.coupled else {"vec_split": 2})}
            cands.append((predicted_cycles(spec, "attention_flash", p, profile, sample=True), -bq, -bkv, p))
    cycles, _, _, best = min(cands, key=lambda c: c[:3])
    log.add("search", spec.name, f"base_q={best['base_q']},base_kv={best['base_kv']}", "cost_model",
            candidates=len(cands), predicted_cycles=round(cycles))
    blocks = spec.batch * spec.heads * ceil(spec.q / best["base_q"])
    return Variant("attention_flash", best, blocks, attention_buffers(spec.d, best["base_q"], best["base_kv"],
                                                                     profile.coupled))


def attention_mte2(spec: AttentionSpec, v: Variant) -> int:
    """GM reads: per block Q once, per kv tile K, V and P (Cube) and the S and P.V tiles (Vector)."""
    bq, bkv = v.params["base_q"], v.params["base_kv"]
    d16, kvp = c1(spec.d) * 16, ceil(bkv / 64) * 64
    total = 0
    for q0 in range(0, spec.q, bq):
        m = min(bq, spec.q - q0)
        total += m * spec.d * 2
        sides = 2 if v.params.get("vec_split", 1) == 2 and m > 1 else 1  # Vector cores sharing the rows
        for kv0 in range(0, spec.kv, bkv):
            n = min(bkv, spec.kv - kv0)
            total += 2 * n * spec.d * 2 + m * n * 2  # K, V, P
            total += sides * n * 2 if spec.mask else 0  # the mask's keys, read by each Vector core
            if not v.params.get("on_chip"):  # S and P.V from the workspace
                total += m * kvp * 4 + m * d16 * 4
    return total * spec.batch * spec.heads


class _VectorSide:  # one Vector core's rows of the block and its flags with the Cube
    def __init__(self, core: SimCore, rows: int, same: bool):
        self.v, self.rows = core, rows
        self.x = {n: CrossFlagSim(same, core.p)
                  for n in ("s_ready", "s_free", "p_ready", "p_free", "o_ready", "o_free")}


class _AttentionReplay:
    """The replay's geometry and its instruction streams per block (replay_attention); one object per replay."""

    def __init__(self, spec, params: dict, profile: Profile) -> None:
        self.spec = spec
        self.params = params
        self.profile = profile
        self.bq, self.bkv = params["base_q"], params["base_kv"]
        self.on_chip = bool(params.get("on_chip"))
        self.split = self.params.get("vec_split", 1) == 2
        self.reader = "V" if self.on_chip else "MTE2"  # what reads the S and P.V tiles on the Vector side
        self.D1 = ceil(self.spec.d / 16)
        self.d16 = self.D1 * 16
        self.kvp = ceil(self.bkv / 64) * 64
        self.parts = self.kvp // 64
        self.qt, self.kvt = ceil(self.spec.q / self.bq), ceil(self.spec.kv / self.bkv)

    def mmad_and_hand_over(self, c: SimCore, sides: list, ev: int, mnk: tuple, ub_elems: int, gm_elems: int,
                           tile: str) -> None:
        """The end of both Cube stages once L0A/L0B are loaded: mmad, then Fixpipe hands the tile (S or P.V)
        to the Vector side (tile + "_free" / "_ready" cross flags), into UB on a coupled core or the workspace."""
        c.set_flag("MTE1", "MTE2", ev)
        c.set_flag("MTE1", "M", ev)
        c.wait_flag("MTE1", "M", ev)
        c.wait_flag("FIX", "M", ev)
        c.mmad(*mnk)
        c.set_flag("M", "MTE1", ev)
        c.set_flag("M", "FIX", ev)
        c.wait_flag("M", "FIX", ev)
        for sd in sides:
            sd.x[tile + "_free"].wait(c, "FIX")
        if self.on_chip:
            c.fixpipe_to_ub(ub_elems)
        else:
            c.fixpipe(gm_elems, 4)
        c.set_flag("FIX", "M", ev)
        for sd in sides:
            sd.x[tile + "_ready"].set(c, "FIX")

    def scores(self, c: SimCore, sides: list, j: int, m: int) -> None:
        n = min(self.bkv, self.spec.kv - j * self.bkv)
        n1 = ceil(n / 16)
        c.wait_flag("MTE1", "MTE2", 1)
        c.copy_gm(1, n * self.spec.d, 2, "L1", src=1)
        c.set_flag("MTE2", "MTE1", 1)
        c.wait_flag("MTE2", "MTE1", 1)
        c.wait_flag("M", "MTE1", 1)
        c.load2d(self.D1 * n1, "L0B")
        self.mmad_and_hand_over(c, sides, 1, (m, n1 * 16, self.D1 * 16), n1 * ceil(m / 16) * 256, m * n, "s")

    def pv(self, c: SimCore, sides: list, j: int, m: int) -> None:
        n = min(self.bkv, self.spec.kv - j * self.bkv)
        n1, m1 = ceil(n / 16), ceil(m / 16)
        c.wait_flag("MTE1", "MTE2", 2)
        c.copy_gm(1, n * self.spec.d, 2, "L1", src=2)
        for sd in sides:
            sd.x["p_ready"].wait(c, "MTE2")
        c.copy_gm(1, m * n, 2, "L1", src=WORKSPACE)
        for sd in sides:
            sd.x["p_free"].set(c, "MTE2")
        c.set_flag("MTE2", "MTE1", 2)
        c.wait_flag("MTE2", "MTE1", 2)
        c.wait_flag("M", "MTE1", 2)
        for _ in range(m1):
            c.load2d(n1, "L0A")
        for _ in range(n1):
            c.load2d(self.D1, "L0B")
        self.mmad_and_hand_over(c, sides, 2, (m, self.D1 * 16, n1 * 16), self.D1 * m1 * 256, m * self.spec.d, "o")

    def rows_reduce(self, v: SimCore, fold: str, reduce: str, rows: int) -> None:
        for _ in range(max(0, self.parts - 1)):
            v.vec(fold, True, rows)
        v.vec(reduce, True, rows)

    def softmax(self, sd: _VectorSide, j: int) -> None:
        v, x, rows = sd.v, sd.x, sd.rows
        n = min(self.bkv, self.spec.kv - j * self.bkv)
        tile = rows * self.kvp
        if self.spec.mask:
            v.wait_flag("V", "MTE2", 3)
            v.copy_gm(1, n, 2, "UB", src=3)
            v.set_flag("MTE2", "V", 3)
        if self.on_chip:
            x["s_ready"].wait(v, "V")
            for _ in range(ceil(n / 16)):
                v.vec("Copy", True, rows)
            x["s_free"].set(v, "V")
        else:
            v.wait_flag("V", "MTE2", 1)
            x["s_ready"].wait(v, "MTE2")
            v.copy_gm(1, tile, 4, "UB", src=WORKSPACE)
            x["s_free"].set(v, "MTE2")
            v.set_flag("MTE2", "V", 1)
            v.wait_flag("MTE2", "V", 1)
        v.vec_flat(tile, 64, [("Muls", True)])
        if self.spec.mask:
            v.wait_flag("MTE2", "V", 3)
            v.vec_flat(n, 64, [("Cast", True)])
            for _ in range(self.parts):
                v.vec("Add", True, rows)
            v.set_flag("V", "MTE2", 3)
        for _ in range(n // 64, self.parts):
            v.vec("Dup", True, rows)
        self.rows_reduce(v, "Max", "ReduceMax", rows)
        v.vec_flat(rows, 64, [("Max", True), ("Sub", True), ("Exp", True), ("Copy", True)])
        v.set_flag("V", "S", 0)
        v.wait_flag("V", "S", 0)
        for _ in range(2 * rows):
            v.scalar_read()
        v.set_flag("S", "V", 0)
        v.wait_flag("S", "V", 0)
        for _ in range(rows):
            v.vec("Adds", True, self.parts)
        v.vec_flat(tile, 64, [("Exp", True)])
        self.rows_reduce(v, "Add", "ReduceSum", rows)
        v.vec_flat(rows, 64, [("Mul", True), ("Add", True)])
        v.wait_flag("MTE3", "V", 1)
        v.vec_flat(tile, 64, [("Cast", True)])
        if not self.on_chip:
            v.set_flag("V", "MTE2", 1)
        v.set_flag("V", "MTE3", 1)
        v.wait_flag("V", "MTE3", 1)
        x["p_free"].wait(v, "MTE3")
        v.copy_ub_to_gm(1, tile, 2)
        v.set_flag("MTE3", "V", 1)
        x["p_ready"].set(v, "MTE3")

    def update(self, sd: _VectorSide) -> None:
        v, x, rows = sd.v, sd.x, sd.rows
        if self.on_chip:
            x["o_ready"].wait(v, "V")
            for _ in range(self.D1):
                v.vec("Copy", True, rows)
            x["o_free"].set(v, "V")
        else:
            v.wait_flag("V", "MTE2", 2)
            x["o_ready"].wait(v, "MTE2")
            v.copy_gm(1, rows * self.d16, 4, "UB", src=WORKSPACE)
            x["o_free"].set(v, "MTE2")
            v.set_flag("MTE2", "V", 2)
            v.wait_flag("MTE2", "V", 2)
        for _ in range(rows):
            v.vec_flat(self.d16, 64, [("Muls", True)])
        v.vec_flat(rows * self.d16, 64, [("Add", True)])
        if not self.on_chip:
            v.set_flag("V", "MTE2", 2)

    def begin(self, sd: _VectorSide, c: SimCore) -> None:
        v, x = sd.v, sd.x
        for _ in range(2):
            x["s_free"].set(v, self.reader)
            x["p_free"].set(c, "MTE2")
            x["o_free"].set(v, self.reader)
        if not self.on_chip:
            v.set_flag("V", "MTE2", 1)
            v.set_flag("V", "MTE2", 2)
        v.set_flag("MTE3", "V", 1)
        if self.spec.mask:
            v.set_flag("V", "MTE2", 3)

    def end(self, sd: _VectorSide, c: SimCore) -> None:
        v, x, rows = sd.v, sd.x, sd.rows
        v.vec_flat(rows, 64, [("Reciprocal", True)])
        v.set_flag("V", "S", 0)
        v.wait_flag("V", "S", 0)
        for _ in range(rows):
            v.scalar_read()
        v.set_flag("S", "V", 0)
        v.wait_flag("S", "V", 0)
        for _ in range(rows):
            v.vec_flat(self.d16, 64, [("Muls", True)])
        v.vec_flat(rows * self.d16, 64, [("Cast", True)])
        v.set_flag("V", "MTE3", 3)
        v.wait_flag("V", "MTE3", 3)
        if self.spec.d == self.d16:
            v.copy_ub_to_gm(1, rows * self.spec.d, 2)
        else:
            v.copy_ub_to_gm(rows, self.spec.d, 2)
        for _ in range(2):
            x["s_free"].wait(c, "FIX")
            x["p_free"].wait(v, "MTE3")
            x["o_free"].wait(c, "FIX")
        if not self.on_chip:
            v.wait_flag("V", "MTE2", 1)
            v.wait_flag("V", "MTE2", 2)
        v.wait_flag("MTE3", "V", 1)
        if self.spec.mask:
            v.wait_flag("V", "MTE2", 3)

    def block(self, c: SimCore, v0: SimCore, v1: SimCore, blk: int) -> None:
        q0 = (blk % self.qt) * self.bq
        m = min(self.bq, self.spec.q - q0)
        m1 = ceil(m / 16)
        same = c is v0
        if c.blocks > 0:
            c.barrier_all()
            if not same:
                v0.barrier_all()
                v1.barrier_all()
        nv = 2 if self.split and m > 1 else 1
        half = (m + 1) // 2 if nv == 2 else m
        sides = [_VectorSide(v0, half, same), _VectorSide(v1, m - half, same)][:nv]
        for sd in sides:
            self.begin(sd, c)
        for ev in (1, 2):
            c.set_flag("MTE1", "MTE2", ev)
            c.set_flag("M", "MTE1", ev)
            c.set_flag("FIX", "M", ev)
        c.copy_gm(1, m * self.spec.d, 2, "L1", src=0)
        c.set_flag("MTE2", "MTE1", 0)
        c.wait_flag("MTE2", "MTE1", 0)
        for _ in range(m1):
            c.load2d(self.D1, "L0A")
        for sd in sides:
            sd.v.vec_flat(sd.rows, 64, [("Dup", True), ("Dup", True)])
            sd.v.vec_flat(sd.rows * self.d16, 64, [("Dup", True)])
        self.scores(c, sides, 0, m)
        if self.kvt > 1:
            self.scores(c, sides, 1, m)
        for sd in sides:
            self.softmax(sd, 0)
        for j in range(self.kvt):
            self.pv(c, sides, j, m)
            if j + 2 < self.kvt:
                self.scores(c, sides, j + 2, m)
            for sd in sides:
                if j + 1 < self.kvt:
                    self.softmax(sd, j + 1)
                self.update(sd)
        for sd in sides:
            self.end(sd, c)
        for ev in (1, 2):
            c.wait_flag("MTE1", "MTE2", ev)
            c.wait_flag("M", "MTE1", ev)
            c.wait_flag("FIX", "M", ev)


def replay_attention(spec, params: dict, profile: Profile) -> Prediction:
    """templates/attention_flash.cpp.j2, instruction for instruction."""
    r = _AttentionReplay(spec, params, profile)
    return launch_group(profile, spec.batch * spec.heads * r.qt, r.block)


FAMILY = register(Family("attention_flash", "attention", "cube", attention_rule, attention_mte2, replay_attention))
