"""conv2d_winograd: Winograd F(2x2,3x3) / F(4x4,3x3) for 3x3 stride-1 convolutions in three launches: the
input transform on the Vector unit, the per-position products as batched Cube GEMMs, the output transform on the
Vector unit; the weight transform is baked (templates/conv2d_winograd.cpp.j2, math in codegen/ir/winograd.py)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import ceil

from .. import KilnError
from ..cost import model as cost
from ..cost.blocks import cube_drain, cube_k_loop, program_ops, rows_load2d, run_program
from ..cost.model import WORKSPACE, PingPongSim, Prediction, SimCore, launch, then
from ..ir import layouts, winograd
from ..ir.opspec import C0, Conv2dSpec, Tensor, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, fits, half16, predicted_cycles, r16, register, tag_of
from .ranking import EXACT_REPLAYS, K_FRACTALS, TILE_EDGES, step_sizes

WINOGRAD_TILES = (2, 4)


def winograd_legal(spec: Conv2dSpec) -> str | None:
    """Why Winograd cannot implement this conv, or None (3x3, stride 1, dilation 1; any padding)."""
    if spec.c04:
        return "its input is a small-channel image in NC1HWC0_C04, which only Load3D reads"
    if spec.cin2:
        return "a second source is accumulated into its L0C"
    if spec.mid:
        return "a 1x1 conv is chained after it"
    if spec.program:
        return "an elementwise program epilogue runs in the direct kernel's Vector pass"
    if (spec.kh, spec.kw) != (3, 3):
        return f"kernel {spec.kh}x{spec.kw} is not 3x3"
    if (spec.sh, spec.sw) != (1, 1):
        return f"stride {spec.sh}x{spec.sw} is not 1"
    if (spec.dh, spec.dw) != (1, 1):
        return f"dilation {spec.dh}x{spec.dw} is not 1"
    return None


@dataclass(frozen=True)
class WinogradGeometry:
    tile: int
    th: int   # tile rows
    tw: int   # tile columns
    p: int    # tiles over the batch: the GEMM's M

    @property
    def alpha(self) -> int:
        return self.tile + 2

    @property
    def positions(self) -> int:
        return self.alpha * self.alpha

    @property
    def p_pad(self) -> int:
        return r16(self.p)


def winograd_geometry(spec: Conv2dSpec, tile: int) -> WinogradGeometry:
    th, tw = ceil(spec.ho / tile), ceil(spec.wo / tile)
    return WinogradGeometry(tile, th, tw, spec.n * th * tw)


def winograd_tile_waste(spec: Conv2dSpec, tile: int) -> float:
    """Share of computed output pixels that fall outside the image (partial tiles at the edges)."""
    g = winograd_geometry(spec, tile)
    return 1.0 - (spec.ho * spec.wo) / (g.th * g.tw * tile * tile)


def winograd_ub(tile: int, tb: int, residual: bool, bias: bool) -> tuple[int, int]:
    """UB bytes of the input-transform and the output-transform passes (the template's allocations)."""
    alpha = tile + 2
    xi, plane32 = alpha * alpha, tb * 16 * 4
    raw = alpha * (tb * tile + 2) * 32
    p1 = 2 * raw + 2 * xi * plane32 + alpha * plane32 + 2 * xi * tb * 32
    out_row = tile * tb * tile * 32
    p3 = 2 * xi * plane32 + tile * alpha * plane32 + tile * tile * plane32 + alpha * plane32 + 2 * out_row
    p3 += (2 * 256 if bias else 0) + (2 * out_row if residual else 0)
    return p1, p3


def winograd_rule(spec: Conv2dSpec, profile: Profile, tile: int, log: OptLog | None = None,
                      search: bool = False) -> Variant | None:
    """The Winograd variant with tile `tile`, or None if no tile batch fits UB."""
    g = winograd_geometry(spec, tile)
    C1, CO1 = c1(spec.cin), c1(spec.cout)
    vcores, ccores = profile.cores_for("vector"), profile.cores_for("cube")
    tb = None
    for cand in range(min(64, ceil(g.tw / 4) * 4), 0, -4):  # widest row chunk whose buffers fit
        if max(winograd_ub(tile, cand, spec.residual, spec.bias)) <= profile.capacity["UB"]:
            tb = cand
            break
    if tb is None:
        return None
    rows = spec.n * g.th * ceil(g.tw / tb)  # Vector blocks before splitting channels
    c1_block = ceil(C1 / min(C1, ceil(vcores / rows)))    # enough channel groups to cover the Vector cores
    co1_block = ceil(CO1 / min(CO1, ceil(vcores / rows)))
    base_m, base_n, base_k1 = min(128, r16(g.p)), min(256, CO1 * 16), min(4, C1)

    def gemm_bufs(bm, bn, step):
        return {"L1": 2 * step * bm * 32 + 2 * step * (bn // 16) * 512, "L0A": 2 * (bm // 16) * base_k1 * 512,
                "L0B": 2 * base_k1 * (bn // 16) * 512, "L0C": (bm // 16) * (bn // 16) * 1024}

    def gemm_blocks(bm, bn):
        return g.positions * ceil(g.p / bm) * ceil(CO1 * 16 / bn)
    while fits(profile, gemm_bufs(base_m, base_n, 1)) and base_n > 16:
        base_n = half16(base_n)
    while gemm_blocks(base_m, base_n) < ccores and base_n > 64:
        base_n = half16(base_n)
    c1_step = next(st for st in range(C1, 0, -1) if fits(profile, gemm_bufs(base_m, base_n, st)) is None)
    params = dict(tile=tile, tile_batch=tb, c1_block=c1_block, co1_block=co1_block, base_m=base_m, base_n=base_n,
                  base_k1=base_k1, c1_step=c1_step)
    if search:
        assert log is not None, "the search logs its choice"

        def gemm_buffers(bm, bn, bk, step):
            return {"L1": 2 * step * bm * 32 + 2 * step * (bn // 16) * 512, "L0A": 2 * (bm // 16) * bk * 512,
                    "L0B": 2 * bk * (bn // 16) * 512, "L0C": (bm // 16) * (bn // 16) * 1024}
        params = search_winograd(spec, params, profile, log, gemm_buffers,
                                 lambda t: max(winograd_ub(tile, t, spec.residual, spec.bias)))
    bufs = {"L1": (2 * params["c1_step"] * params["base_m"] * 32
                   + 2 * params["c1_step"] * (params["base_n"] // 16) * 512),
            "L0A": 2 * (params["base_m"] // 16) * params["base_k1"] * 512,
            "L0B": 2 * params["base_k1"] * (params["base_n"] // 16) * 512,
            "L0C": (params["base_m"] // 16) * (params["base_n"] // 16) * 1024,
            "UB": max(winograd_ub(tile, params["tile_batch"], spec.residual, spec.bias))}
    return Variant("conv2d_winograd", params, gemm_blocks(params["base_m"], params["base_n"]), bufs)


def winograd_weight_shape(spec: Conv2dSpec, tile: int) -> tuple[int, int, int, int]:
    return ((tile + 2) ** 2 * c1(spec.cin), c1(spec.cout), C0, C0)


def winograd_mte2(spec: Conv2dSpec, v: Variant) -> int:
    """GM reads of the three Winograd launches: input rows (inside the image) per channel block, V and U per
    GEMM block, then M, the bias and the residual rows per output channel block."""
    p = v.params
    g = winograd_geometry(spec, p["tile"])
    C1, CO1, tb, raw_w = c1(spec.cin), c1(spec.cout), p["tile_batch"], p["tile_batch"] * p["tile"] + 2
    total = 0
    for th in range(g.th):
        row0 = th * g.tile - spec.pt
        rows_in = sum(1 for a in range(g.alpha) if 0 <= row0 + a < spec.h)
        rows_out = sum(1 for i in range(g.tile) if th * g.tile + i < spec.ho)
        for tw0 in range(0, g.tw, tb):
            col0 = tw0 * g.tile - spec.pl
            cols = max(0, min(raw_w, spec.w - col0) - max(0, -col0))
            ntb = min(tb, g.tw - tw0)
            total += C1 * rows_in * cols * 32                      # input transform
            total += CO1 * g.positions * ntb * 64                  # M (fp32) in the output transform
            total += CO1 * 256 if spec.bias else 0                 # four copies of 16 fp32 bias values
            if spec.residual:
                total += CO1 * rows_out * min(ntb * g.tile, spec.wo - tw0 * g.tile) * 32
    total *= spec.n
    bm, bn = p["base_m"], p["base_n"]
    for m0 in range(0, g.p, bm):  # V and U fractal rows of every GEMM block
        m1 = ceil(min(bm, g.p - m0) / 16)
        for n1_0 in range(0, CO1, bn // 16):
            total += g.positions * C1 * (m1 + min(bn // 16, CO1 - n1_0)) * 512
    return total


def replay_winograd(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    # In the caller's replay mode (cost.run already set it: sampling, recording, the step's L2 hits)
    return winograd_launches(spec, params, profile, (1, 2, 3))


def winograd_phases(spec: Conv2dSpec, params: dict, profile: Profile, which: tuple[int, ...],
                    sample: bool = False) -> Prediction:
    """The Winograd kernel's launches `which` (1 input transform, 2 GEMMs, 3 output transform), chained:
    the search tunes the GEMM and the Vector passes separately since their parameters do not interact."""
    return cost.run(lambda s, p, pr: winograd_launches(s, p, pr, which), spec, params, profile, sample)


class _WinogradReplay:
    """The replay's geometry and its instruction streams per block (winograd_launches); one object per replay."""

    def __init__(self, spec: Conv2dSpec, params: dict, profile: Profile, which: tuple[int, ...]) -> None:
        self.spec = spec
        self.params = params
        self.profile = profile
        self.which = which
        self.tile, self.tb = self.params["tile"], self.params["tile_batch"]
        self.g = winograd_geometry(self.spec, self.tile)
        self.alpha, self.xi = self.g.alpha, self.g.positions
        self.C1, self.CO1 = c1(self.spec.cin), c1(self.spec.cout)
        self.twc = ceil(self.g.tw / self.tb)
        self.raw_w, self.plane = self.tb * self.tile + 2, self.tb * 16
        self.bt_ops = program_ops(winograd.linear_program(winograd.tile(self.tile).BT))
        self.at_ops = program_ops(winograd.linear_program(winograd.tile(self.tile).AT))
        self.c1_block, self.co1_block = self.params["c1_block"], self.params["co1_block"]
        self.c1_groups, self.co1_groups = ceil(self.C1 / self.c1_block), ceil(self.CO1 / self.co1_block)
        self.bm, self.bn = params["base_m"], params["base_n"]
        self.bk1, self.step = params["base_k1"], params["c1_step"]
        self.m_tiles, self.n_tiles = ceil(self.g.p / self.bm), ceil(self.CO1 * 16 / self.bn)
        self.epi = ([("Maxs", True), ("Mins", True)] if spec.clip_hi > 0 else [("Relu", True)] if spec.relu
                    else [])

    def chunk(self, b: int, groups: int) -> tuple[int, int, int]:
        rest = b // groups
        ci = rest % self.twc
        th = (rest // self.twc) % self.g.th
        tw0 = ci * self.tb
        return th, tw0, min(self.tb, self.g.tw - tw0)

    def input_signature(self, b: int) -> tuple:
        """What input_transform's block b issues depends on (cost/steady.py): its channel blocks, its tile
        columns and the rows and columns of its input patch inside the image."""
        th, tw0, ntb = self.chunk(b, self.c1_groups)
        c1_0 = (b % self.c1_groups) * self.c1_block
        row0, col0 = th * self.tile - self.spec.pt, tw0 * self.tile - self.spec.pl
        return (min(self.c1_block, self.C1 - c1_0), ntb, max(0, -col0), min(self.raw_w, self.spec.w - col0),
                tuple(0 <= row0 + a < self.spec.h for a in range(self.alpha)))

    def gemm_signature(self, b: int) -> tuple:
        ni, mi = b % self.n_tiles, (b // self.n_tiles) % self.m_tiles
        return min(self.bm, self.g.p - mi * self.bm), min(self.bn // 16, self.CO1 - ni * (self.bn // 16))

    def output_signature(self, b: int) -> tuple:
        th, tw0, ntb = self.chunk(b, self.co1_groups)
        co1_0 = (b % self.co1_groups) * self.co1_block
        return (min(self.co1_block, self.CO1 - co1_0), ntb, min(ntb * self.tile, self.spec.wo - tw0 * self.tile),
                sum(1 for i in range(self.tile) if th * self.tile + i < self.spec.ho))

    def input_transform(self, core: SimCore, b: int) -> None:
        th, tw0, ntb = self.chunk(b, self.c1_groups)
        c1_0 = (b % self.c1_groups) * self.c1_block
        c1_n = min(self.c1_block, self.C1 - c1_0)
        row0, col0 = th * self.tile - self.spec.pt, tw0 * self.tile - self.spec.pl
        q_lo, q_hi = max(0, -col0), min(self.raw_w, self.spec.w - col0)
        edge = row0 < 0 or row0 + self.alpha > self.spec.h or q_lo > 0 or q_hi < self.raw_w
        valid_rows = sum(1 for a in range(self.alpha) if 0 <= row0 + a < self.spec.h)
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        for it in range(c1_n):
            s = inq.slot(it)
            inq.acquire_for_write(s)
            if edge:
                core.vec_flat(self.alpha * self.raw_w * 16, 128, [("Dup", False)])
                core.set_flag("V", "MTE2", 4)
                core.wait_flag("V", "MTE2", 4)
            if q_hi > q_lo:
                for _ in range(valid_rows):
                    core.copy_gm(1, (q_hi - q_lo) * 16, 2, "UB", src=0)
            inq.written(s)
            inq.acquire_for_read(s)
            for _ in range(self.xi):
                core.vec("Cast", True, self.tb // 4)
            inq.released(s)
            run_program(core, self.bt_ops, self.alpha * self.plane)
            for _ in range(self.alpha):
                run_program(core, self.bt_ops, self.plane)
            so = outq.slot(it)
            outq.acquire_for_write(so)
            core.vec_flat(self.xi * self.plane, 64, [("Cast", True)])
            outq.written(so)
            outq.acquire_for_read(so)
            core.copy_ub_to_gm(self.xi, ntb * 16, 2)
            outq.released(so)
        inq.drain()
        outq.drain()

    def gemm(self, core: SimCore, b: int) -> None:
        ni, mi = b % self.n_tiles, (b // self.n_tiles) % self.m_tiles
        m = min(self.bm, self.g.p - mi * self.bm)
        m1 = ceil(m / 16)
        n1_cnt = min(self.bn // 16, self.CO1 - ni * (self.bn // 16))
        if core.blocks > 0:
            core.wait_flag("FIX", "M", 0)
        steps = [min(self.step, self.C1 - c1a) for c1a in range(0, self.C1, self.step)]  # V (workspace), then U
        chunks = [(k, [(k, m1 * 256, WORKSPACE), (k, n1_cnt * 256, 1)]) for k in steps]
        cube_k_loop(core, m, n1_cnt * 16, chunks, self.bk1, (rows_load2d(core, m), lambda kc, k1n: [kc * n1_cnt]))
        cube_drain(core, m * n1_cnt * 16, 4)

    def output_transform(self, core: SimCore, b: int) -> None:
        th, tw0, ntb = self.chunk(b, self.co1_groups)
        co1_0 = (b % self.co1_groups) * self.co1_block
        co1_n = min(self.co1_block, self.CO1 - co1_0)
        valid_w = min(ntb * self.tile, self.spec.wo - tw0 * self.tile)
        valid_h = sum(1 for i in range(self.tile) if th * self.tile + i < self.spec.ho)
        inq, outq = PingPongSim(core, "MTE2", "V", 0), PingPongSim(core, "V", "MTE3", 2)
        yn = self.tile * self.tile * self.plane
        for it in range(co1_n):
            s = inq.slot(it)
            inq.acquire_for_write(s)
            core.copy_gm(self.xi, ntb * 16, 4, "UB", src=WORKSPACE)
            if self.spec.bias:
                core.copy_gm(4, 16, 4, "UB", src=2)
            if self.spec.residual:
                for _ in range(valid_h):
                    core.copy_gm(1, valid_w * 16, 2, "UB", src=3 if self.spec.bias else 2)
            inq.written(s)
            inq.acquire_for_read(s)
            run_program(core, self.at_ops, self.alpha * self.plane)
            for _ in range(self.tile):
                run_program(core, self.at_ops, self.plane)
            if self.spec.bias:
                core.vec_flat(yn, 64, [("Add", True)])
            if self.spec.residual:
                for _ in range(self.tile * self.tile):
                    core.vec("Cast", True, self.tb // 4)
                core.vec_flat(yn, 64, [("Add", True)])
            inq.released(s)
            if self.epi:
                core.vec_flat(yn, 64, self.epi)
            so = outq.slot(it)
            outq.acquire_for_write(so)
            for _ in range(self.tile * self.tile):
                core.vec("Cast", True, self.tb // 4)
            outq.written(so)
            outq.acquire_for_read(so)
            for _ in range(valid_h):
                core.copy_ub_to_gm(1, valid_w * 16, 2)
            outq.released(so)
        inq.drain()
        outq.drain()


def winograd_launches(spec: Conv2dSpec, params: dict, profile: Profile, which: tuple[int, ...]) -> Prediction:
    r = _WinogradReplay(spec, params, profile, which)
    rows = spec.n * r.g.th * r.twc
    phases = {1: lambda: launch(profile, "vector", rows * r.c1_groups, r.input_transform, r.input_signature),
              2: lambda: launch(profile, "cube", r.xi * r.m_tiles * r.n_tiles, r.gemm, r.gemm_signature),
              3: lambda: launch(profile, "vector", rows * r.co1_groups, r.output_transform, r.output_signature)}
    return then(*(phases[i]() for i in which))


def search_winograd(spec: Conv2dSpec, rule_params: dict, profile: Profile, log: OptLog, gemm_buffers,
                    vector_ub) -> dict:
    """Tiling of conv2d_winograd: the GEMM phase (base_m x base_n x base_k1 x c1_step, ranked on that phase
    alone) and the Vector passes (tiles per step x channel blocks per block, on phases 1 and 3)."""
    g = winograd_geometry(spec, rule_params["tile"])
    C1, CO1 = c1(spec.cin), c1(spec.cout)
    p = dict(rule_params)

    def phase_cycles(params, which, sample):
        return winograd_phases(spec, params, profile, which, sample).cycles

    gemm = []
    for bm in TILE_EDGES:
        if bm > ceil(g.p / 16) * 16 and bm != 16:
            continue
        for bn in TILE_EDGES:
            if bn > CO1 * 16 and bn != 16:
                continue
            for bk in K_FRACTALS:
                if bk > C1:
                    continue
                for step in step_sizes(C1):
                    cand = dict(p, base_m=bm, base_n=bn, base_k1=bk, c1_step=step)
                    bufs = gemm_buffers(bm, bn, bk, step)
                    if all(b <= profile.capacity[pos] for pos, b in bufs.items()):
                        gemm.append(cand)
    vec = []
    for tb in range(4, min(64, ceil(g.tw / 4) * 4) + 1, 4):
        if vector_ub(tb) > profile.capacity["UB"]:
            continue
        for cb in sorted({1, 2, 4, 8, C1} & set(range(1, C1 + 1))):
            for ob in sorted({1, 2, 4, 8, CO1} & set(range(1, CO1 + 1))):
                vec.append(dict(tile_batch=tb, c1_block=cb, co1_block=ob))
    quick = sorted(gemm, key=lambda c: (phase_cycles(c, (2,), True), sorted(c.items())))[:EXACT_REPLAYS]
    best_gemm = min([p] + quick, key=lambda c: phase_cycles(c, (2,), False))
    quickv = sorted(vec, key=lambda v: (phase_cycles(dict(p, **v), (1, 3), True), sorted(v.items())))[:EXACT_REPLAYS]
    best_vec = min([{k: p[k] for k in ("tile_batch", "c1_block", "co1_block")}] + quickv,
                   key=lambda v: phase_cycles(dict(p, **v), (1, 3), False))
    best = dict(p, **{k: best_gemm[k] for k in ("base_m", "base_n", "base_k1", "c1_step")}, **best_vec)
    rule_cycles = predicted_cycles(spec, "conv2d_winograd", p, profile)
    best_cycles = predicted_cycles(spec, "conv2d_winograd", best, profile)
    if best_cycles > rule_cycles:  # cannot happen when the phases are independent; keep the rule if it does
        best, best_cycles = p, rule_cycles
    log.add("search", spec.name, tag_of("conv2d_winograd", best),
            "cost_model", candidates=len(gemm) + len(vec), fitting=len(gemm) + len(vec),
            replayed=2 * (len(quick) + 1 + len(quickv) + 1), rule_cycles=round(rule_cycles),
            best_cycles=round(best_cycles))
    return best


def from_params(spec: Conv2dSpec, profile: Profile, params: dict, source: str) -> tuple[dict, dict, int]:
    """A pinned or recorded tiling (with its tile) completed from the rule's, checked, with buffers and blocks."""
    if winograd_legal(spec) or params["tile"] not in WINOGRAD_TILES:
        raise KilnError("tiling", spec.name, f"{source}: Winograd F({params['tile']},3) cannot implement this "
                        f"conv: {winograd_legal(spec) or 'tile must be 2 or 4'}")
    base = winograd_rule(spec, profile, params["tile"])
    if base is None:
        raise KilnError("tiling", spec.name, f"{source}: no Winograd F({params['tile']},3) tile batch fits UB")
    p = dict(base.params, **params)
    if p["tile_batch"] % 4:
        raise KilnError("tiling", spec.name, f"{source}: tile_batch={p['tile_batch']} is not a multiple of 4")
    bufs = {"L1": 2 * p["c1_step"] * p["base_m"] * 32 + 2 * p["c1_step"] * (p["base_n"] // 16) * 512,
            "L0A": 2 * (p["base_m"] // 16) * p["base_k1"] * 512, "L0B": 2 * p["base_k1"] * (p["base_n"] // 16) * 512,
            "L0C": (p["base_m"] // 16) * (p["base_n"] // 16) * 1024,
            "UB": max(winograd_ub(p["tile"], p["tile_batch"], spec.residual, spec.bias))}
    g = winograd_geometry(spec, p["tile"])
    return p, bufs, g.positions * ceil(g.p / p["base_m"]) * ceil(c1(spec.cout) * 16 / p["base_n"])


def kernel_inputs(spec: Conv2dSpec, v: Variant) -> list:
    """The spec's inputs with the weights in the Winograd-transformed fractal layout."""
    ins = spec.inputs()
    ins[1] = Tensor("u", winograd_weight_shape(spec, v.params["tile"]), "fp16", "WINOGRAD_FRACTAL_Z")
    return ins


def record_allowed(spec: Conv2dSpec, record: dict, options, log: OptLog) -> bool:
    """Explicit options outrank a tuning record: no Winograd when it is off, only the forced tile when forced."""
    mode = "OFF" if options.force_direct_conv else options.use_winograd
    tile = record.get("params", {}).get("tile")
    if mode == "OFF" or (mode in ("F2", "F4") and mode != f"F{tile}"):
        log.add("search", spec.name, "tuning_record:skipped", "option", record_family="conv2d_winograd",
                USE_WINOGRAD=options.use_winograd, FORCE_DIRECT_CONV=options.force_direct_conv)
        return False
    return True


def winograd_program(tile: int, which: str) -> list:
    """The template's instruction chains of one transform matrix (BT or AT) of F(tile x tile, 3 x 3)."""
    return winograd.linear_program(getattr(winograd.tile(tile), which))


def weight_transform(spec: Conv2dSpec, v: Variant) -> tuple[str, Callable]:
    """The weight blob a Winograd kernel reads: G g G^T of the FRACTAL_Z weight, once, at build time."""
    tile = v.params["tile"]
    return f"@winograd_f{tile}", lambda arr: layouts.fractal_z_to_winograd(arr, spec.cout, spec.cin, tile)


FAMILY = register(Family("conv2d_winograd", "conv2d", "cube", None, winograd_mte2, replay_winograd,
                algorithm=lambda v: f"winograd_f{v.params['tile']}",
                tunable=("tile_batch", "c1_block", "co1_block", "base_m", "base_n", "base_k1", "c1_step"),
                record_extra=("tile",), from_params=from_params, kernel_inputs=kernel_inputs,
                record_allowed=record_allowed, symbol_family=lambda v: f"conv2d_winograd_f{v.params['tile']}",
                weight_transform=weight_transform, template_globals={
                    "winograd_program": winograd_program}))
