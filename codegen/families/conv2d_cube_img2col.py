"""conv2d_cube_img2col: direct convolution on the Cube, img2col through L1 (Load3D), an M (pixels) x N (output
channels) tile per block; a chained conv (window conv -> 1x1, intermediate in L1) and a second accumulated 1x1
source are forms of it (templates/conv2d_cube_img2col.cpp.j2). Searched: the rule tiling, then the cost model's
best."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from math import ceil

from .. import KilnError
from ..cost.blocks import (
    L1Carry,
    VectorPass,
    cube_drain,
    cube_k_loop,
    finish_rows,
    pingpong_tile,
    rows_load2d,
    tile_loop,
)
from ..cost.model import OUT, CrossFlagSim, Prediction, SimCore, current_mode, launch, launch_group, then
from ..cost.steady import Memo
from ..ir.eltwise_program import epilogue_steps, scratch_names, vector_ops
from ..ir.opspec import C0, Conv2dSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import RULE_DERIVED, Family, GenericForm, Variant, fits, half16, r16, register, share128
from .ranking import K_FRACTALS, TILE_EDGES, pick_best, step_sizes, wide_grid


def row_view(spec: Conv2dSpec, base_m: int) -> Conv2dSpec:
    """The map whose rows an M tile's L1 slab holds (the template's slab_source): a 1x1 source at row stride s > 1
    without vertical padding whose M tiles each cover whole images of h = ho x s rows reads only the rows it uses,
    every s-th, in one strided copy: a map of ho rows at row stride 1 (a ResNet downsample reads half its rows).
    Any other source, a chain's and a small-channel image's, as it is."""
    if (spec.kh == 1 and spec.sh > 1 and spec.pt == spec.pb == 0 and not spec.mid and not spec.c04
            and base_m >= spec.ho * spec.wo and spec.h == spec.ho * spec.sh):
        return replace(spec, h=spec.ho, sh=1)
    return spec


def conv_tile_rows(spec: Conv2dSpec, base_m: int) -> list[tuple[int, int, int, int]]:
    """Per M tile: (first pixel, pixels, slab rows [lo, lo+rows) needed: input rows, clipped to the image, of its
    row view)."""
    spec = row_view(spec, base_m)
    M, out = spec.ho * spec.wo, []
    for p0 in range(0, M, base_m):
        m = min(base_m, M - p0)
        ho0, ho1 = p0 // spec.wo, (p0 + m - 1) // spec.wo
        lo = max(0, ho0 * spec.sh - spec.pt)
        hi = min(spec.h - 1, ho1 * spec.sh - spec.pt + (spec.kh - 1) * spec.dh)
        out.append((p0, m, lo, max(0, hi - lo + 1)))  # 0 rows: the tile reads only padding
    return out


def pixel_elems(spec: Conv2dSpec) -> int:
    """fp16 values per pixel of a channel block in GM and L1: 16, or 4 for a small-channel input (NC1HWC0_C04)."""
    return 4 if spec.c04 else C0


def k_per_c1(spec: Conv2dSpec) -> int:
    """K fractals per input channel block: one per tap, or a small-channel input's four taps to a fractal."""
    return spec.k_fractals // c1(spec.cin)


def conv_slab_elems(spec: Conv2dSpec, base_m: int) -> int:
    """fp16 elements per channel block of the largest L1 feature-map slab an M tile needs: its input rows (and,
    with a second source, the larger of the two sources' slabs: they share the buffer)."""
    rows = max(1, max(r for *_, r in conv_tile_rows(spec, base_m)))
    slab = rows * spec.w * pixel_elems(spec)
    if spec.cin2:
        second = spec.second()
        slab = max(slab, max(1, max(r for *_, r in conv_tile_rows(second, base_m))) * second.w * 16)
    return slab


def conv_buffers(spec: Conv2dSpec, base_m: int, base_n: int, base_k1: int, c1_step: int,
                  l1_buffers: int = 2, images: int = 1) -> dict[str, int]:
    """On-chip bytes of a direct-conv tiling; l1_buffers 2 = the L1 chunks ping-pong (the next chunk's GM load
    overlaps this one's Cube work), 1 = one chunk at a time (room for a chunk twice as large); images: the images
    a block computes together (each its own slab in L1, its own M fractals in L0A and L0C; one weight chunk)."""
    return {
        "L1": l1_buffers * (images * c1_step * conv_slab_elems(spec, base_m) * 2
                            + c1_step * k_per_c1(spec) * (base_n // 16) * 512)
              + (base_n * 4 if spec.bias else 0),
        "L0A": 2 * images * (base_m // 16) * base_k1 * 512,
        "L0B": 2 * base_k1 * (base_n // 16) * 512,
        "L0C": images * (base_m // 16) * (base_n // 16) * 1024,
        "BT": base_n * 4 if spec.bias else 0,
    }


IMAGE_COUNTS = (2, 3, 4, 6, 8)  # images per block the search tries where an M tile holds a whole image


def image_groups(spec: Conv2dSpec, p: dict) -> int:
    """A direct conv's image groups: the batch in blocks of `images` images (the last may hold fewer)."""
    return ceil(spec.n / p.get("images", 1))


def chain_buffers(spec: Conv2dSpec, p: dict) -> dict:
    """On-chip bytes of a chained conv (spec.mid > 0) tiled by p: the window conv's slabs and weights for all `mid`
    channels, the fp16 intermediate tile in L1, the 1x1 conv's weight chunk (ping-pong), both L0C tiles. With
    `resident`, both convs' whole weights stay in L1 across the core's blocks instead of their chunks."""
    base_m, base_k1, c1_step, base_n2, base_k2 = (p[k] for k in ("base_m", "base_k1", "c1_step", "base_n2", "base_k2"))
    mid1, m1, taps = c1(spec.mid), base_m // 16, spec.kh * spec.kw
    if p.get("resident"):
        weights = (ceil(c1(spec.cin) / c1_step) * c1_step * taps * mid1 * 512
                   + ceil(c1(spec.cout) / (base_n2 // 16)) * mid1 * base_n2 * 32)
    else:
        weights = 2 * c1_step * taps * mid1 * 512 + 2 * mid1 * (base_n2 // 16) * 512
    return {
        "L1": 2 * c1_step * conv_slab_elems(spec, base_m) * 2 + weights + m1 * mid1 * 512
              + (mid1 * 64 if spec.mid_bias else 0) + (base_n2 * 4 if spec.bias else 0),
        "L0A": 2 * m1 * max(base_k1, base_k2) * 512,
        "L0B": 2 * max(base_k1 * mid1, base_k2 * (base_n2 // 16)) * 512,
        "L0C": m1 * max(mid1, base_n2 // 16) * 1024,  # c_out reuses c_mid once Fixpipe moved it to L1
        "BT": max(mid1 * 64 if spec.mid_bias else 0, base_n2 * 4 if spec.bias else 0),
    }


def chain_fits(spec: Conv2dSpec, p: dict, profile: Profile) -> bool:
    return fits(profile, chain_buffers(spec, p)) is None


def resident_cores(spec: Conv2dSpec, base_m: int, profile: Profile) -> int:
    """A chain with its weights resident in L1 (`resident`: one block per M tile, no N split): the cores that
    load them, once each, and keep them across their M tiles (the parameter's value, so the GM bytes follow from
    the tiling alone)."""
    return min(spec.n * ceil(spec.ho * spec.wo / base_m), profile.cores_for("cube"))


def resident_offer(spec: Conv2dSpec, base_m: int, profile: Profile) -> dict:
    """{"resident": cores} where a core runs more than one M tile of base_m (there is something to keep), else {}."""
    several = spec.n * ceil(spec.ho * spec.wo / base_m) > profile.cores_for("cube")
    return {"resident": resident_cores(spec, base_m, profile)} if several else {}


def chain_rule(spec: Conv2dSpec, profile: Profile, log: OptLog, search: bool = False) -> Variant:
    """Tiling of a chained conv: one block per M tile (all channels of both convs); the rule takes the largest
    M tile that fits and still gives every Cube core a block, then the widest 1x1 N chunk."""
    M, C1, K1 = spec.ho * spec.wo, c1(spec.cin), c1(spec.cin) * spec.kh * spec.kw
    cores, CO1 = profile.cores_for("cube"), c1(spec.cout)
    best = None
    for base_m in (128, 64, 32, 16):
        if base_m > 16 and ceil(M / base_m) * spec.n < cores:
            continue
        for base_n2 in (256, 128, 64, 32, 16):
            base_n2 = min(base_n2, CO1 * 16)
            for c1_step in range(C1, 0, -1):
                p = dict(base_m=base_m, base_k1=min(4, K1), c1_step=c1_step, base_n2=base_n2,
                         base_k2=min(4, c1(spec.mid)), n_split=1)
                if chain_fits(spec, p, profile):
                    best = p
                    break
            if best:
                break
        if best:
            break
    if best is None:
        raise KilnError("tiling", spec.name, f"no chained tiling fits {profile.name} (fusion should have refused it)")
    best["slab_rows"] = max(1, max(r for *_, r in conv_tile_rows(spec, best["base_m"])))
    if spec.vector_epilogue:  # the Vector pass over the output, as for a single conv (never on chip here)
        best.update(vector_pass(spec, profile, log))
    if search:
        best = search_chain(spec, best, profile, log)
    bufs = chain_buffers(spec, best)
    if spec.vector_epilogue:
        bufs["UB"] = epi_bytes(spec) * best["epi_tile"]
    return Variant("conv2d_cube_img2col", best, spec.n * ceil(M / best["base_m"]) * best["n_split"], bufs)


def conv_rule(spec: Conv2dSpec, profile: Profile, log: OptLog, search: bool = False) -> Variant:
    if spec.mid:
        return chain_rule(spec, profile, log, search)
    M, C1, CO1 = spec.ho * spec.wo, c1(spec.cin), c1(spec.cout)
    K1 = spec.k_fractals
    cores = profile.cores_for("cube")
    best, limit = None, None
    base_n = min(256, CO1 * 16)
    while best is None:  # largest N tile first, then M tile, then channel blocks per L1 chunk
        for base_m in (128, 64, 32, 16):
            base_m = min(base_m, r16(M))
            base_k1 = min(4, K1)
            for c1_step in range(C1, 0, -1):
                bufs = conv_buffers(spec, base_m, base_n, base_k1, c1_step)
                limit = fits(profile, bufs)
                if limit is None:
                    best = dict(base_m=base_m, base_n=base_n, base_k1=base_k1, c1_step=c1_step)
                    break
            if best:
                break
        if best is None:
            if base_n == 16:
                raise KilnError("tiling", spec.name, f"no tile fits {limit} of {profile.name} even at 16x16 with one "
                                f"channel block: {conv_buffers(spec, 16, 16, 1, 1)}")
            base_n = half16(base_n)
            log.add("tiling", spec.name, f"base_n={base_n}", "tile_shrunk", limit=limit)
    # Spread over the cores: narrower N tiles first (keeps the img2col reuse), then M.
    def blocks(v):
        return spec.n * ceil(M / v["base_m"]) * ceil(CO1 * 16 / v["base_n"])
    before = blocks(best)
    while blocks(best) < cores and best["base_n"] > 64:
        best["base_n"] = half16(best["base_n"])
    while blocks(best) < cores and best["base_m"] > 32:
        best["base_m"] = half16(best["base_m"])
    if blocks(best) != before:
        log.add("tiling", spec.name, f"base_m={best['base_m']},base_n={best['base_n']}", "balance_cores",
                blocks_before=before, blocks=blocks(best), cores=cores)
    best["slab_rows"] = max(1, max(r for *_, r in conv_tile_rows(spec, best["base_m"])))
    epi_ub = 0
    if spec.vector_epilogue and profile.coupled:  # L0C -> UB on the same core: acc32, r16, r32, y16 per block
        best["on_chip"] = 1
        log.add("tiling", spec.name, "epilogue=on_chip", "vector_epilogue", coupled=True)
    elif spec.vector_epilogue:  # the Vector pass over the output: y (and residual) in, y out, ping-pong
        best.update(vector_pass(spec, profile, log))
        epi_ub = epi_bytes(spec) * best["epi_tile"]
    if search:  # the rule's tiling is the baseline the search must beat
        best = search_conv(spec, best, profile, log, conv_buffers)
    bufs = conv_buffers(spec, best["base_m"], best["base_n"], best["base_k1"], best["c1_step"],
                         best.get("l1_buffers", 2))
    if epi_ub:
        bufs["UB"] = epi_ub
    if best.get("on_chip"):
        bufs["UB"] = on_chip_ub(spec, best["base_m"])
    return Variant("conv2d_cube_img2col", best, blocks(best), bufs)


def vector_pass(spec: Conv2dSpec, profile: Profile, log: OptLog) -> dict:
    """Where the Vector pass of a conv's epilogue (residual add, clip, program) runs off chip, and its UB tile. On a
    split profile: in the Cube's own launch (mixed), each group's two AIVs finishing its blocks' output tiles as
    Fixpipe writes them, so the kernel pays one launch instead of two and the Vector work overlaps the Cube's; whole
    rows of a tile (BASE_M x 16 values, at most 4096) per UB tile, so where a program's fp32 rows leave less UB, and
    for a chain on a coupled profile, a second launch over the output, its tiles shared by the Vector cores."""
    cap = (profile.capacity["UB"] // epi_bytes(spec)) // 128 * 128
    if not profile.coupled and cap >= max(TILE_EDGES) * C0:
        log.add("tiling", spec.name, f"epilogue=mixed,epi_tile={cap}", "vector_epilogue", coupled=False)
        return {"epi_tile": cap, "mixed": 1}
    numel = spec.n * c1(spec.cout) * spec.ho * spec.wo * C0
    tile = share128(numel, profile.cores_for("vector"), cap)
    log.add("tiling", spec.name, f"epilogue=vector_core,epi_tile={tile}", "vector_epilogue", coupled=profile.coupled)
    return {"epi_tile": tile}


def program_rows(spec: Conv2dSpec) -> int:
    """fp32 buffers a program epilogue adds to the Vector epilogue: one per step and per step's scratch."""
    steps = epilogue_steps(spec.program)
    return len(steps) + len(scratch_names(steps))


def epi_bytes(spec: Conv2dSpec) -> int:
    """UB bytes per element of the Vector-core epilogue's tile: y, residual and result fp16 ping-pong; with a
    program, the fp32 tile (and fp32 residual) and the program's fp32 rows."""
    return 2 * 3 * 2 + (4 * (1 + int(spec.residual) + program_rows(spec)) if spec.program else 0)


def on_chip_ub(spec: Conv2dSpec, base_m: int) -> int:
    """UB bytes of the on-chip conv epilogue: fp32 tile, fp16 and fp32 residual, fp16 result (one channel block),
    and a program's fp32 rows."""
    return base_m * 16 * (4 + 2 + 4 + 2 + 4 * program_rows(spec))


def conv_mte2(spec: Conv2dSpec, v: Variant) -> int:
    p = v.params
    if spec.mid:  # per M tile: the window conv's chunks for all mid channels, then the 1x1 weights per N chunk
        mid1, CO1, total = c1(spec.mid), c1(spec.cout), 0
        split = p.get("n_split", 1)
        tiles = conv_tile_rows(spec, p["base_m"])
        for _, _, _, rows in tiles:
            total += split * (c1(spec.cin) * rows * spec.w * 32 + (mid1 * 64 if spec.mid_bias else 0))
            total += CO1 * 64 if spec.bias else 0
        # both convs' weights per M tile (each N split loads the window conv's again), or (resident) per core
        window, pointwise = c1(spec.cin) * spec.kh * spec.kw * mid1 * 512, mid1 * CO1 * 512
        loads = p.get("resident") or spec.n * len(tiles)  # resident: the cores that hold them
        weights = loads * (window + pointwise) + (split - 1) * spec.n * len(tiles) * window
        epilogue = spec.output().nbytes * (2 if spec.residual else 1) if spec.vector_epilogue else 0
        return total * spec.n + weights + epilogue
    CO1 = c1(spec.cout)
    n_tiles = [(n1, min(p["base_n"] // 16, CO1 - n1)) for n1 in range(0, CO1, p["base_n"] // 16)]
    maps = weights = 0  # per image its slabs; per image group (a block's images) the weights and bias
    second = spec.second() if spec.cin2 else None
    rows2 = conv_tile_rows(second, p["base_m"]) if second else []
    for mi, (_, _, _, rows) in enumerate(conv_tile_rows(spec, p["base_m"])):
        for n1_0, n1c in n_tiles:
            lo, hi = spec.group_c1_range(n1_0, n1c)  # all C1 blocks, or (grouped) those of the tile's groups
            for c1a in range(lo, hi, p["c1_step"]):
                c1n = min(p["c1_step"], hi - c1a)
                maps += c1n * rows * spec.w * 2 * pixel_elems(spec)
                weights += c1n * k_per_c1(spec) * n1c * 512
            if second:  # the second source's channel blocks: its rows and its 1x1 weights
                for c1a in range(0, c1(second.cin), p["c1_step"]):
                    c1n = min(p["c1_step"], c1(second.cin) - c1a)
                    maps += c1n * rows2[mi][3] * second.w * 32
                    weights += c1n * n1c * 512
            weights += n1c * 64 if spec.bias else 0
    epilogue = 0
    if p.get("on_chip"):  # the tile stays on chip: only the residual is read
        epilogue = spec.output().nbytes if spec.residual else 0
    elif spec.vector_epilogue:  # the Vector pass reads the conv output (and the residual) back
        epilogue = spec.output().nbytes * (2 if spec.residual else 1)
    return maps * spec.n + weights * image_groups(spec, p) + epilogue


def conv_sources(spec: Conv2dSpec) -> dict[str, int]:
    """The template's input index of each operand: x, w, [mid_bias, w_mid (chain)], [bias], [residual],
    [x2, w2 (second source)]."""
    chain_in = 1 + int(bool(spec.mid_bias)) if spec.mid else 0
    after = 2 + chain_in + int(bool(spec.bias)) + int(bool(spec.residual))
    return {"x": 0, "w": 1, "mid_bias": 2, "w_mid": 1 + chain_in, "bias": 2 + chain_in, "residual": after - 1,
            "x2": after, "w2": after + 1}


def on_chip_epilogue(core: SimCore, spec: Conv2dSpec, m: int, n1_cnt: int, images: int = 1) -> None:
    """The coupled-profile epilogue of conv2d_cube_img2col: per image and channel block L0C -> UB, residual add and
    activation on the same core's Vector unit, one fp16 rounding, UB -> GM."""
    n = m * 16
    act = [("Maxs", True), ("Mins", True)] if spec.clip_hi > 0 else [("Relu", True)] if spec.relu else []
    act += [(op, True) for op in vector_ops(epilogue_steps(spec.program))]  # a program epilogue, in fp32
    core.set_flag("M", "FIX", 0)
    core.wait_flag("M", "FIX", 0)
    for q in range(images * n1_cnt):
        if q > 0:
            core.wait_flag("MTE3", "FIX", 2)
        core.fixpipe_to_ub(ceil(m / 16) * 256)
        if spec.residual:
            if q > 0:
                core.wait_flag("V", "MTE2", 2)
            core.copy_gm(1, n, 2, "UB", src=conv_sources(spec)["residual"])
        core.set_flag("FIX", "V", 1)
        core.wait_flag("FIX", "V", 1)
        if spec.residual:
            core.set_flag("MTE2", "V", 1)
            core.wait_flag("MTE2", "V", 1)
            core.vec_flat(n, 64, [("Cast", True), ("Add", True)])
            core.set_flag("V", "MTE2", 2)
        core.vec_flat(n, 64, act + [("Cast", True)])
        core.set_flag("V", "MTE3", 1)
        core.wait_flag("V", "MTE3", 1)
        core.copy_ub_to_gm(1, n, 2)
        core.set_flag("MTE3", "FIX", 2)
    core.wait_flag("MTE3", "FIX", 2)
    if spec.residual:
        core.wait_flag("V", "MTE2", 2)
    core.set_flag("FIX", "M", 0)


class _Img2colReplay:
    """The replay's geometry and its instruction streams per block (img2col_cube); one object per replay."""

    def __init__(self, spec: Conv2dSpec, params: dict, profile: Profile) -> None:
        self.spec = spec
        self.params = params
        self.profile = profile
        self.bm, self.bn = params["base_m"], params.get("base_n", 16)
        self.bk1, self.step = params["base_k1"], params["c1_step"]
        self.C1, self.CO1, self.taps = c1(self.spec.cin), c1(self.spec.cout), k_per_c1(self.spec)
        self.M = self.spec.ho * self.spec.wo
        self.tiles = conv_tile_rows(self.spec, self.bm)
        self.m_tiles, self.n_tiles = len(self.tiles), ceil(self.CO1 * 16 / self.bn)
        self.second = self.spec.second() if self.spec.cin2 else None
        self.tiles2 = conv_tile_rows(self.second, self.bm) if self.second else []
        self.n_split = self.params.get("n_split", 1)
        self.src = conv_sources(spec)
        self.images = self.params.get("images", 1)
        self.blocks = image_groups(spec, params) * self.m_tiles * self.n_tiles
        self.cores = max(1, min(self.blocks, profile.cores_for("cube")))
        self.chunks = [self.chunks_of(ni) for ni in range(self.n_tiles)]

    def chunks_of(self, ni: int) -> int:
        """L1 chunks of a block of N tile ni: its channel blocks (grouped: its groups'), then the second source's."""
        lo, hi = self.spec.group_c1_range(ni * (self.bn // 16), min(self.bn // 16, self.CO1 - ni * (self.bn // 16)))
        return ceil((hi - lo) / self.step) + (ceil(c1(self.second.cin) / self.step) if self.second else 0)

    def carry(self, b: int) -> L1Carry | None:
        """With `prefetch`, block b's place in its core's L1 queue (cost/blocks.py L1Carry; the template's
        block()): the chunks of the core's earlier blocks (block b on core b % cores), first, last."""
        if not self.params.get("prefetch"):
            return None
        if len(set(self.chunks)) == 1:
            before = b // self.cores * self.chunks[0]
        else:
            before = sum(self.chunks[e % self.n_tiles] for e in range(b % self.cores, b, self.cores))
        return L1Carry(before, b < self.cores, b + self.cores >= self.blocks)

    def images_of(self, b: int) -> int:
        """The images block b computes: `images`, fewer in the batch's last group."""
        first = b // (self.n_tiles * self.m_tiles) * self.images
        return min(self.images, self.spec.n - first)

    def signature(self, b: int) -> tuple:
        """What block b's instructions depend on (cost/steady.py): its M tile's pixels and input rows (and the
        second source's), its N tile's width, (grouped) how many C1 blocks its groups reduce over, its images."""
        ni, mi = b % self.n_tiles, (b // self.n_tiles) % self.m_tiles
        _, m, _, rows = self.tiles[mi]
        n1_cnt = min(self.bn // 16, self.CO1 - ni * (self.bn // 16))
        lo, hi = self.spec.group_c1_range(ni * (self.bn // 16), n1_cnt)
        carry = self.carry(b)  # with prefetch: the L1 slot parity it starts on, its core's first or last block
        return (m, rows, n1_cnt, hi - lo, self.tiles2[mi][3] if self.second else 0,
                (carry.chunk0 % 2, carry.first, carry.last) if carry else None, self.images_of(b))

    def out_tile(self, b: int) -> tuple[int, int, int]:
        """Block b's output tile as MIXED hands it over (the template's out_tile): (pixels m, rows: images x channel
        blocks, channel blocks n1_cnt)."""
        if self.spec.mid:
            per = self.params["base_n2"] // 16
            chunks, ns = ceil(self.CO1 / per), b % self.n_split
            j0, j1 = chunks * ns // self.n_split, chunks * (ns + 1) // self.n_split
            m, n1_cnt = self.tiles[(b // self.n_split) % self.m_tiles][1], min(self.CO1, j1 * per) - j0 * per
            return m, n1_cnt, n1_cnt
        ni, mi = b % self.n_tiles, (b // self.n_tiles) % self.m_tiles
        n1_cnt = min(self.bn // 16, self.CO1 - ni * (self.bn // 16))
        return self.tiles[mi][1], self.images_of(b) * n1_cnt, n1_cnt

    def chain_signature(self, b: int) -> tuple:
        """chain_block's: its share of the 1x1's N chunks, its M tile's pixels and input rows."""
        _, m, _, rows = self.tiles[(b // self.n_split) % self.m_tiles]
        return b % self.n_split, m, rows

    def block(self, core: SimCore, b: int) -> None:
        ni, mi = b % self.n_tiles, (b // self.n_tiles) % self.m_tiles
        _, m, _, rows = self.tiles[mi]
        m1, imgs = ceil(m / 16), self.images_of(b)
        n1_cnt = min(self.bn // 16, self.CO1 - ni * (self.bn // 16))
        if core.blocks > 0:
            core.wait_flag("FIX", "M", 0)
        src = self.src
        if self.spec.bias:
            core.copy_gm(1, n1_cnt * 16, 4, "L1", src=src["bias"])
            core.set_flag("MTE2", "MTE1", 4)
            core.wait_flag("MTE2", "MTE1", 4)
            core.load_bias_table(n1_cnt * 16)
        chunks = []
        lo, hi = self.spec.group_c1_range(ni * (self.bn // 16), n1_cnt)  # grouped: the tile's groups' C1 blocks
        for c1a in range(lo, hi, self.step):
            c1n = min(self.step, hi - c1a)
            slab = [(c1n, rows * self.spec.w * pixel_elems(self.spec), src["x"])] * imgs if rows > 0 else []
            chunks.append((c1n * self.taps, slab + [(c1n * self.taps, n1_cnt * 256, src["w"])]))
        if self.second:  # the second source's channel blocks go on into the same L0C (1x1: one tap)
            rows2 = self.tiles2[mi][3]
            for c1a in range(0, c1(self.second.cin), self.step):
                c1n = min(self.step, c1(self.second.cin) - c1a)
                chunks.append((c1n, ([(c1n, rows2 * self.second.w * 16, src["x2"])] * imgs if rows2 > 0 else [])
                               + [(c1n, n1_cnt * 256, src["w2"])]))
        # The Load3D rate depends on the source's kernel height and stride (the second source is a 1x1): one
        # (kh, stride_w) per A load, in the order cube_k_loop issues them (per chunk, per BASE_K1 slice).
        main = ceil((hi - lo) / self.step)  # the chunks of the main source
        sources = [self.spec] * main + [self.second or self.spec] * (len(chunks) - main)
        geoms = iter([(conv.kh, conv.sw) for conv, (k1n, _) in zip(sources, chunks)
                      for _ in range(ceil(k1n / self.bk1))])

        def a_load(kc: int) -> None:  # one Load3D per image, into its M fractals of L0A
            geom = next(geoms)
            for _ in range(imgs):
                core.load3d(m1, kc, *geom)
        cube_k_loop(core, (m,) * imgs, n1_cnt * 16, chunks, self.bk1,  # an mmad per image
                    (a_load, lambda kc, k1n: [kc * n1_cnt]), self.carry(b) or self.params.get("l1_buffers", 2))
        if self.params.get("on_chip"):
            on_chip_epilogue(core, self.spec, m, n1_cnt, imgs)
        else:  # Fixpipe writes each image's tile
            cube_drain(core, m * n1_cnt * 16, tiles=imgs)

    def chain_block(self, core: SimCore, b: int) -> None:  # the template's chain_block
        ns = b % self.n_split
        _, m, _, rows = self.tiles[(b // self.n_split) % self.m_tiles]
        m1, mid1 = ceil(m / 16), c1(self.spec.mid)
        later = core.blocks > 0
        if later:
            core.wait_flag("FIX", "M", 0)
        src = self.src
        if self.spec.mid_bias:
            core.copy_gm(1, mid1 * 16, 4, "L1", src=src["mid_bias"])
            core.set_flag("MTE2", "MTE1", 4)
            core.wait_flag("MTE2", "MTE1", 4)
            core.load_bias_table(mid1 * 16)
        chunks = []
        kept = later and self.params.get("resident")  # the weights the core's first block left in L1
        for c1a in range(0, self.C1, self.step):
            c1n = min(self.step, self.C1 - c1a)
            slab = [(c1n, rows * self.spec.w * 16, src["x"])] if rows > 0 else []
            chunks.append((c1n * self.taps, slab + ([] if kept else [(c1n * self.taps, mid1 * 256, src["w"])])))
        kh, sw = self.spec.kh, self.spec.sw
        cube_k_loop(core, m, mid1 * 16, chunks, self.bk1,
                    (lambda kc: core.load3d(m1, kc, kh, sw), lambda kc, k1n: [kc * mid1]))
        core.set_flag("M", "FIX", 0)
        core.wait_flag("M", "FIX", 0)
        if later:
            core.wait_flag("MTE1", "FIX", 3)
        core.fixpipe_to_l1(mid1 * m1 * 256)
        core.set_flag("FIX", "MTE1", 3)
        core.wait_flag("FIX", "MTE1", 3)
        bn2, bk2 = self.params["base_n2"], self.params["base_k2"]
        n_chunks = ceil(self.CO1 / (bn2 // 16))
        j0, j1 = n_chunks * ns // self.n_split, n_chunks * (ns + 1) // self.n_split
        for j in range(j0, j1):
            n1_0 = j * (bn2 // 16)
            n1_cnt = min(bn2 // 16, self.CO1 - n1_0)
            if j > j0:
                core.wait_flag("FIX", "M", 0)
            if self.spec.bias:
                core.copy_gm(1, n1_cnt * 16, 4, "L1", src=src["bias"])
                core.set_flag("MTE2", "MTE1", 4)
                core.wait_flag("MTE2", "MTE1", 4)
                core.load_bias_table(n1_cnt * 16)
            cube_k_loop(core, m, n1_cnt * 16, [(mid1, [] if kept else [(mid1, n1_cnt * 256, src["w_mid"])])], bk2,
                        (rows_load2d(core, m), lambda kc, k1n, n1_cnt=n1_cnt: [kc * n1_cnt]))
            cube_drain(core, m * n1_cnt * 16)
        core.set_flag("MTE1", "FIX", 3)


def img2col_cube(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    r = _Img2colReplay(spec, params, profile)
    if spec.mid:
        return launch(profile, "cube", spec.n * r.m_tiles * r.n_split, r.chain_block, r.chain_signature)
    return launch(profile, "cube", r.blocks, r.block, r.signature)


def replay_img2col(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    """templates/conv2d_cube_img2col.cpp.j2: the Cube launch, then (a Vector-core epilogue on split profiles)
    the Vector launch over the output, or (mixed) one launch of both."""
    if params.get("mixed"):
        return img2col_mixed(spec, params, profile)
    cube = img2col_cube(spec, params, profile)
    if not spec.vector_epilogue or params.get("on_chip"):
        return cube
    return then(cube, img2col_epilogue(spec, params, profile))


def pass_ops(spec: Conv2dSpec) -> tuple[int, list[tuple[str, bool]]]:
    """(lanes, ops per element) of the Vector pass's tile (the template's pass_tile): in fp16 the residual add and
    the activation; with a program in fp32, y (and the residual) cast up, + residual, activation, the program, one
    cast down."""
    ops = ([("Add", False)] if spec.residual else []) + (
        [("Maxs", False), ("Mins", False)] if spec.clip_hi > 0 else
        [("Relu", False)] if spec.relu else [] if spec.residual else [("Copy", False)])
    if not spec.program:
        return 128, ops
    wide = [("Cast", True)] * (1 + int(spec.residual)) + [(op, True) for op, _ in ops if op != "Copy"]
    return 64, wide + [(op, True) for op in vector_ops(epilogue_steps(spec.program))] + [("Cast", True)]


def img2col_mixed(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    """The template's MIXED launch: each block's Cube work on its group's AIC, then its output tile's rows split
    over the group's two AIVs (finish_rows), handed over by a cross-core flag."""
    r = _Img2colReplay(spec, params, profile)
    cube_block, signature = (r.chain_block, r.chain_signature) if spec.mid else (r.block, r.signature)
    blocks = spec.n * r.m_tiles * r.n_split if spec.mid else r.blocks
    if current_mode().bound:  # the AIC's blocks alone bound the launch from below (its AIVs only add to it)
        return launch(profile, "cube", blocks, cube_block, signature)
    vpass = VectorPass(params["epi_tile"], *pass_ops(spec), conv_sources(spec)["residual"] if spec.residual else None)
    memo = Memo()  # items met again in the same situation (cost/steady.py), shared by the launch's cores

    def item(core: SimCore, key: tuple, run: Callable[[], None]) -> None:
        if current_mode().every_block or core.trace is not None:
            run()
        else:
            memo.item(core, key, run)

    def body(aic: SimCore, aiv0: SimCore, aiv1: SimCore, b: int) -> None:
        item(aic, ("cube", aic.blocks > 0, signature(b)), lambda: cube_block(aic, b))
        m, rows, n1_cnt = r.out_tile(b)
        for aiv, r0, r1 in ((aiv0, 0, (rows + 1) // 2), (aiv1, (rows + 1) // 2, rows)):
            if r0 < r1:  # the flag's time comes from the AIC: waited on outside the AIV's own item
                ready = CrossFlagSim(False, profile)
                ready.set(aic, "FIX")
                ready.wait(aiv, "MTE2")
                item(aiv, ("rows", m, n1_cnt, r0, r1),
                     partial(finish_rows, aiv, vpass, m, n1_cnt, r0, r1))
    return launch_group(profile, blocks, body)


def img2col_epilogue(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    """The Vector-core pass after the Cube: residual add and activation over the output, tile by tile."""
    CO1, M = c1(spec.cout), spec.ho * spec.wo
    numel = spec.n * CO1 * M * 16
    tile = params["epi_tile"]
    ntiles = ceil(numel / tile)
    vblocks = min(ntiles, profile.cores_for("vector"))
    lanes, per_elem = pass_ops(spec)

    sources = [OUT] + ([conv_sources(spec)["residual"]] if spec.residual else [])
    memo = Memo()  # the tiles' effects, shared by the launch's cores

    def epilogue(core: SimCore, b: int) -> None:
        t0, t1 = ntiles * b // vblocks, ntiles * (b + 1) // vblocks
        tile_loop(core, [min(tile, numel - t * tile) for t in range(t0, t1)],
                  lambda q, inq, outq, s, n: pingpong_tile(q, (inq, outq), s, n, [(n, src) for src in sources],
                                                           [(n, lanes, per_elem)]), memo)

    return launch(profile, "vector", vblocks, epilogue)


def conv_l1_partition(spec: Conv2dSpec, p: dict) -> tuple[int, int]:
    """L1 bytes of a direct-conv tiling's feature-map slabs and weight chunks (both buffers)."""
    bufs, step = p.get("l1_buffers", 2), p["c1_step"]
    return (bufs * step * conv_slab_elems(spec, p["base_m"]) * 2,
            bufs * step * k_per_c1(spec) * (p["base_n"] // 16) * 512)


def conv_blocks(spec: Conv2dSpec, p: dict) -> int:
    """A direct (not chained) conv's blocks: per image group, its M tiles by its N tiles."""
    return image_groups(spec, p) * ceil(spec.ho * spec.wo / p["base_m"]) * ceil(c1(spec.cout) * 16 / p["base_n"])


def with_prefetch(spec: Conv2dSpec, p: dict, profile: Profile) -> dict:
    """A double-buffered tiling whose cores run more than one block, with its L1 queue running on across them
    (prefetch: the next block's first chunk loads while this block's last one computes, where the block's end
    drained the queue and the next one started on an empty L1; never slower, as the wait it drops is the only
    difference). Else the tiling without it (one block per core: nothing to carry; one L1 buffer: no overlap)."""
    q = {k: v for k, v in p.items() if k != "prefetch"}
    if spec.mid or p.get("l1_buffers", 2) != 2:  # a chain's blocks do not carry their queue
        return q
    if conv_blocks(spec, p) > profile.cores_for("cube"):
        q["prefetch"] = 1
    return q


def search_conv(spec: Conv2dSpec, rule_params: dict, profile: Profile, log: OptLog, buffers) -> dict:
    """Tiling of conv2d_cube_img2col: base_m x base_n x base_k1 x c1_step; `buffers(spec, m, n, k1, step)`
    gives the on-chip bytes of a candidate (tiling's own accounting)."""
    cands, fit = conv_candidates(spec, rule_params, profile, buffers, images=IMAGE_COUNTS)
    return pick_best(spec, "conv2d_cube_img2col", rule_params, (cands, fit), profile, log,
                 lambda p: conv_l1_partition(spec, p))


def conv_candidates(spec: Conv2dSpec, rule_params: dict, profile: Profile, buffers, edges=TILE_EDGES,
                    images: tuple[int, ...] = ()):
    """(every tiling candidate of a direct conv, the buffer-fit predicate). images: the image counts per block to
    try besides one, where an M tile holds a whole image (a batch of small maps: the images share each weight
    load, and their M fractals fill the Cube where one image's few would leave it waiting on L0B)."""
    M, C1, CO1 = spec.ho * spec.wo, c1(spec.cin), c1(spec.cout)
    K1 = spec.k_fractals
    extra = {k: v for k, v in rule_params.items() if k in RULE_DERIVED}
    cands = []
    for bm in edges:
        if bm > ceil(M / 16) * 16 and bm != 16:
            continue
        for bn in edges:
            if bn > CO1 * 16 and bn != 16:
                continue
            for bk in K_FRACTALS:
                if bk > K1:
                    continue
                for step in step_sizes(C1):
                    rows = max(1, max(r for *_, r in conv_tile_rows(spec, bm)))
                    p = dict(base_m=bm, base_n=bn, base_k1=bk, c1_step=step, slab_rows=rows, **extra)
                    # single-buffered L1 (no overlap of the next chunk's load): only worth it for a chunk
                    # that does not fit double-buffered, which the fit predicate decides
                    cands += [p, dict(p, l1_buffers=1)]
                    if bm >= M and not spec.mid:
                        cands += [dict(p, images=i) for i in images if i <= spec.n]

    def fit(p):
        bufs = buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["c1_step"], p.get("l1_buffers", 2),
                       p.get("images", 1))
        return all(b <= profile.capacity[pos] for pos, b in bufs.items())
    return cands, fit


def search_chain(spec: Conv2dSpec, rule_params: dict, profile: Profile, log: OptLog) -> dict:
    """Tiling of a chained conv (window conv -> 1x1, intermediate in L1): base_m x base_k1 x c1_step of the
    window conv, base_n2 x base_k2 of the 1x1; one block per M tile."""
    return pick_best(spec, "conv2d_cube_img2col", rule_params, chain_candidates(spec, rule_params, profile), profile,
                     log)


def chain_candidates(spec: Conv2dSpec, rule_params: dict, profile: Profile) -> tuple[list[dict], Callable]:
    """(every tiling candidate of a chained conv, the buffer-fit predicate)."""
    M, C1 = spec.ho * spec.wo, c1(spec.cin)
    K1, MID1, CO1 = C1 * spec.kh * spec.kw, c1(spec.mid), c1(spec.cout)
    extra = {k: v for k, v in rule_params.items() if k in RULE_DERIVED}
    cands = []
    for bm in TILE_EDGES:
        if bm > ceil(M / 16) * 16 and bm != 16:
            continue
        rows = max(1, max(r for *_, r in conv_tile_rows(spec, bm)))
        for bk in (k for k in K_FRACTALS if k <= K1):
            for step in step_sizes(C1):
                for bn2 in (e for e in TILE_EDGES if e <= CO1 * 16 or e == 16):
                    n_chunks = ceil(CO1 / (bn2 // 16))
                    for bk2 in (k for k in K_FRACTALS if k <= MID1):
                        p = dict(base_m=bm, base_k1=bk, c1_step=step, base_n2=bn2, base_k2=bk2, n_split=1,
                                 slab_rows=rows, **extra)
                        cands += [dict(p, n_split=z) for z in (1, 2, 4, 8) if z <= n_chunks]
                        offer = resident_offer(spec, bm, profile)  # weights kept across a core's M tiles
                        cands += [dict(p, **offer)] if offer else []
    return cands, lambda p: chain_fits(spec, p, profile)


def _check_mixed_rows(spec: Conv2dSpec, p: dict, source: str) -> None:
    """The mixed epilogue finishes whole rows of a tile (base_m x 16 values) per UB tile of epi_tile values."""
    if p.get("mixed") and p["base_m"] * C0 > p["epi_tile"]:
        raise KilnError("tiling", spec.name, f"{source}: base_m={p['base_m']} is over what the epilogue in the Cube's "
                        f"launch finishes at once ({p['epi_tile']} values of UB: base_m <= {p['epi_tile'] // C0})")


def from_params(spec: Conv2dSpec, profile: Profile, params: dict, source: str) -> tuple[dict, dict, int]:
    """A pinned, recorded or borrowed tiling completed from the rule's, checked, with its buffers and blocks."""
    if spec.mid:  # a chained conv's tiling (tuning record, kernel-list pin)
        if params.get("images", 1) != 1:
            raise KilnError("tiling", spec.name, f"{source}: images={params['images']}: a chained conv's block is "
                            "one image's M tile (images 1)")
        base = chain_rule(spec, profile, OptLog())
        p = dict(base.params, **params)
        _check_mixed_rows(spec, p, source)
        p["slab_rows"] = max(1, max(r for *_, r in conv_tile_rows(spec, p["base_m"])))
        if p.get("resident"):  # any non-zero value: kept by the cores the tiling's blocks run on
            if p["n_split"] != 1:
                raise KilnError("tiling", spec.name, f"{source}: resident weights need n_split=1 (a core's blocks "
                                f"must use all the 1x1's N chunks), not n_split={p['n_split']}")
            p["resident"] = resident_cores(spec, p["base_m"], profile)
        bufs = dict(base.buffers, **chain_buffers(spec, p))
        n_chunks = ceil(c1(spec.cout) / (p["base_n2"] // 16))
        if not 1 <= p["n_split"] <= n_chunks:
            raise KilnError("tiling", spec.name, f"{source}: n_split={p['n_split']} must be 1..{n_chunks} (the 1x1's "
                            f"N chunks of base_n2={p['base_n2']})")
        return p, bufs, spec.n * ceil(spec.ho * spec.wo / p["base_m"]) * p["n_split"]
    base = conv_rule(spec, profile, OptLog())
    p = dict(base.params, **params)
    _check_mixed_rows(spec, p, source)
    p["slab_rows"] = max(1, max(r for *_, r in conv_tile_rows(spec, p["base_m"])))
    if p.get("l1_buffers", 2) not in (1, 2):
        raise KilnError("tiling", spec.name, f"{source}: l1_buffers={p['l1_buffers']} must be 1 or 2")
    if p.get("prefetch", 0) not in (0, 1) or (p.get("prefetch") and p.get("l1_buffers", 2) != 2):
        raise KilnError("tiling", spec.name, f"{source}: prefetch={p['prefetch']} must be 0 or 1, and 1 only with "
                        "l1_buffers=2 (the L1 queue carried across blocks is the double-buffered one)")
    if not 1 <= p.get("images", 1) <= spec.n:
        raise KilnError("tiling", spec.name, f"{source}: images={p['images']} must be 1..{spec.n} (the batch)")
    bufs = conv_buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["c1_step"], p.get("l1_buffers", 2),
                        p.get("images", 1))
    if "UB" in base.buffers:
        bufs["UB"] = on_chip_ub(spec, p["base_m"]) if p.get("on_chip") else base.buffers["UB"]
    return p, bufs, conv_blocks(spec, p)


def tune_candidates(spec: Conv2dSpec, profile: Profile, edges) -> tuple[dict, list[dict], Callable]:
    rule = conv_rule(spec, profile, OptLog()).params
    if spec.mid:  # a chained conv tiles its 1x1 with base_n2, not base_n (the build search's grid)
        return rule, *chain_candidates(spec, rule, profile)
    return rule, *conv_candidates(spec, rule, profile, conv_buffers, edges, IMAGE_COUNTS)


def space(spec: Conv2dSpec, params: dict, profile: Profile) -> list[dict]:
    """The build search's grid (single-buffered L1 and images aside), for `kiln optimize`."""
    cands, fit = conv_candidates(spec, params, profile, conv_buffers)
    return [with_prefetch(spec, p, profile) for p in cands if "l1_buffers" not in p and fit(p)]


def chain_wide_space(spec: Conv2dSpec, params: dict, profile: Profile) -> list[dict]:
    """A chained conv's tilings with base_m any multiple of 16 off the powers of two (the build search's grid), each
    with every base_k1 and n_split and the kernel's L1 step and 1x1 tiling (and, where the kernel keeps its weights
    and a core runs several M tiles, resident): the M tiles balanced over the cores."""
    K1 = spec.k_fractals
    n_chunks = ceil(c1(spec.cout) / (params["base_n2"] // 16))
    out = []
    for bm in range(16, min(256, ceil(spec.ho * spec.wo / 16) * 16) + 1, 16):
        if bm in TILE_EDGES:
            continue
        rows = max(1, max(r for *_, r in conv_tile_rows(spec, bm)))
        for bk in (k for k in K_FRACTALS if k <= K1):
            p = dict({k: v for k, v in params.items() if k != "resident"}, base_m=bm, base_k1=bk, slab_rows=rows)
            if chain_fits(spec, p, profile):
                out += [dict(p, n_split=z) for z in (1, 2, 4, 8) if z <= n_chunks]
            offer = resident_offer(spec, bm, profile) if params.get("resident") else {}  # the kernel's kept weights
            out += [q for q in [dict(p, n_split=1, **offer)] if offer and chain_fits(spec, q, profile)]
    return out


def wide_space(spec: Conv2dSpec, params: dict, profile: Profile) -> list[dict]:
    if spec.mid:
        return chain_wide_space(spec, params, profile)

    def make(bm, bn, bk, step):
        rows = max(1, max(r for *_, r in conv_tile_rows(spec, bm)))
        p = dict({k: v for k, v in params.items() if k != "prefetch"}, base_m=bm, base_n=bn, base_k1=bk, c1_step=step,
                 slab_rows=rows)
        return p if all(b <= profile.capacity[k] for k, b in conv_buffers(spec, bm, bn, bk, step).items()) else None
    dims = (spec.ho * spec.wo, c1(spec.cout) * 16, spec.k_fractals, c1(spec.cin))
    return wide_grid(spec, "conv2d_cube_img2col", params, profile, dims, "c1_step", make)


# h2, w2: the map of an accumulated second source (a ResNet downsample 1x1); base_n2, base_k2, n_split: chains
GENERIC = GenericForm(("h", "w", "h2", "w2"), ("h", "w", "ho", "wo", "h2", "w2"),
                      ("base_m", "base_n", "base_k1", "c1_step", "slab_rows", "epi_tile", "l1_buffers", "base_n2",
                       "base_k2", "n_split"), structural=("on_chip", "mixed", "prefetch", "images", "resident"))
FAMILY = register(Family("conv2d_cube_img2col", "conv2d", "cube", conv_rule, conv_mte2, replay_img2col, searched=True,
                algorithm=lambda v: "direct_img2col", tunable=("base_m", "base_n", "base_k1", "c1_step"),
                searched_extra=("l1_buffers", "prefetch", "images", "base_n2", "base_k2", "n_split", "resident"),
                from_params=from_params,
                space=space, wide_space=wide_space, candidates=tune_candidates, generic=GENERIC,
                finalist=with_prefetch))
