"""Variants: which kernel family implements an Opspec, with which tiling.

For now one family per op kind and a rule per family that picks the largest
tile fitting the profile's buffers (double-buffered), then shrinks tiles so the
blocks spread over the AI cores. The variant search with the pipe cost model
replaces the rule later; the tiling values are already the templates'
parameters. `mte2_bytes` states the GM traffic a variant implies: the emulator's
counters are tested against it and the cost model will use it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import ceil

from .. import KilnError
from ..ir.opspec import (C0, AttentionSpec, BatchedGemmSpec, Conv2dSpec, DwConv2dSpec, EltwiseSpec, GemmSpec, Opspec, Pool2dSpec,
                     RowSpec, TransposeSpec, c1)
from ..ir.optlog import OptLog
from ..ir.profiles import Profile

FAMILY_OF_KIND = {
    "conv2d": "conv2d_cube_img2col",
    "dwconv2d": "dwconv2d_vector",
    "gemm": "gemm_cube",
    "eltwise": "eltwise_vector",
    "softmax": "softmax_vector",
    "layernorm": "layernorm_vector",
    "bgemm": "batched_gemm_cube",
    "transpose": "transpose_mte",
    "attention": "attention_flash",
}


def family_of(spec: Opspec) -> str:
    if spec.kind == "eltwise" and spec.op == "gelu":
        return "gelu_vector"
    if spec.kind == "pool2d":
        if spec.op == "max":
            return "maxpool2d_vector"
        if spec.is_global:
            return "global_avgpool_vector"
        raise KilnError("tiling", spec.name, "AveragePool with a window smaller than the feature map has no "
                        "kernel yet; supported: MaxPool, GlobalAveragePool (or AveragePool over the whole map)")
    return FAMILY_OF_KIND[spec.kind]
# One letter per tiling parameter, for variant tags.
PARAM_LETTER = {"base_m": "m", "base_n": "n", "base_k1": "k", "c1_step": "c", "slab_rows": "r", "k1_step": "s",
                "rows_per_block": "r", "tile_elems": "t", "chunk_pixels": "p", "rows_per_tile": "r", "planes_per_block": "p",
                "epi_tile": "e", "tile": "f", "tile_batch": "b", "c1_block": "i", "co1_block": "o", "on_chip": "u",
                "base_n2": "q", "base_k2": "j", "n_split": "z",
                "l1_buffers": "d", "base_q": "x", "base_kv": "y", "vec_split": "w"}
UNIT_OF_FAMILY = {"conv2d_cube_img2col": "cube", "conv2d_winograd": "cube", "conv2d_vector": "vector",
                  "gemm_cube": "cube", "dwconv2d_vector": "vector",
                  "eltwise_vector": "vector", "maxpool2d_vector": "vector", "global_avgpool_vector": "vector",
                  "gelu_vector": "vector", "softmax_vector": "vector", "layernorm_vector": "vector",
                  "batched_gemm_cube": "cube", "transpose_mte": "vector", "attention_flash": "cube"}


@dataclass(frozen=True)
class Variant:
    family: str
    params: dict[str, int] = field(hash=False)
    blocks: int = 0
    buffers: dict[str, int] = field(default_factory=dict, hash=False)  # bytes used per position
    notes: dict = field(default_factory=dict, hash=False, compare=False)  # how it was chosen (algorithm, cycles)

    @property
    def unit(self) -> str:
        return UNIT_OF_FAMILY[self.family]

    @property
    def tag(self) -> str:
        """Short variant name: family plus tiling, e.g. gemm_cube_m128n256k4s20."""
        return self.family + "_" + "".join(f"{PARAM_LETTER[k]}{v}" for k, v in self.params.items())


def _fits(profile: Profile, buffers: dict[str, int]) -> str | None:
    """Name of the first buffer that overflows, or None."""
    for pos, used in buffers.items():
        if used > profile.capacity[pos]:
            return pos
    return None


def _r16(x: int) -> int:
    return ceil(x / 16) * 16


def _r32(nbytes: int) -> int:
    """Bytes rounded up to the 32-byte UB block."""
    return ceil(nbytes / 32) * 32


def _share128(numel: int, cores: int, max_tile: int) -> int:
    """Elements per tile so that every core gets at most one tile: the per-core share rounded *up* to
    whole 128-element repeats (rounding down leaves one core a second tile), capped by the UB budget."""
    return max(128, min(max_tile, ceil(ceil(numel / cores) / 128) * 128))


def _half16(x: int) -> int:
    """Half a tile edge, kept a multiple of 16 (the fractal edge)."""
    return max(16, (x // 2) // 16 * 16)


# ---------------------------------------------------------------- conv2d (Cube, img2col)

def conv_tile_rows(spec: Conv2dSpec, base_m: int) -> list[tuple[int, int, int]]:
    """Per M tile: (first pixel, pixels, input rows [lo, lo+rows) needed), clipped to the image."""
    M, out = spec.ho * spec.wo, []
    for p0 in range(0, M, base_m):
        m = min(base_m, M - p0)
        ho0, ho1 = p0 // spec.wo, (p0 + m - 1) // spec.wo
        lo = max(0, ho0 * spec.sh - spec.pt)
        hi = min(spec.h - 1, ho1 * spec.sh - spec.pt + (spec.kh - 1) * spec.dh)
        out.append((p0, m, lo, max(0, hi - lo + 1)))  # 0 rows: the tile reads only padding
    return out


def conv_slab_elems(spec: Conv2dSpec, base_m: int) -> int:
    """fp16 elements per channel block of the largest L1 feature-map slab an M tile needs: its input rows (and,
    with a second source, the larger of the two sources' slabs: they share the buffer)."""
    rows = max(1, max(r for *_, r in conv_tile_rows(spec, base_m)))
    slab = rows * spec.w * 16
    if spec.cin2:
        second = spec.second()
        slab = max(slab, max(1, max(r for *_, r in conv_tile_rows(second, base_m))) * second.w * 16)
    return slab


def _conv_buffers(spec: Conv2dSpec, base_m: int, base_n: int, base_k1: int, c1_step: int,
                  l1_buffers: int = 2) -> dict[str, int]:
    """On-chip bytes of a direct-conv tiling; l1_buffers 2 = the L1 chunks ping-pong (the next chunk's GM load
    overlaps this one's Cube work), 1 = one chunk at a time (room for a chunk twice as large)."""
    return {
        "L1": l1_buffers * (c1_step * conv_slab_elems(spec, base_m) * 2 + c1_step * spec.kh * spec.kw * (base_n // 16) * 512)
              + (base_n * 4 if spec.bias else 0),
        "L0A": 2 * (base_m // 16) * base_k1 * 512,
        "L0B": 2 * base_k1 * (base_n // 16) * 512,
        "L0C": (base_m // 16) * (base_n // 16) * 1024,
        "BT": base_n * 4 if spec.bias else 0,
    }


def chain_buffers(spec: Conv2dSpec, base_m: int, base_k1: int, c1_step: int, base_n2: int, base_k2: int,
                  n_split: int = 1) -> dict:
    """On-chip bytes of a chained conv (spec.mid > 0): the window conv's slabs and weights for all `mid` channels,
    the fp16 intermediate tile in L1, the 1x1 conv's weight chunk (ping-pong), both L0C tiles."""
    mid1, m1 = c1(spec.mid), base_m // 16
    return {
        "L1": 2 * c1_step * conv_slab_elems(spec, base_m) * 2 + 2 * c1_step * spec.kh * spec.kw * mid1 * 512
              + m1 * mid1 * 512 + 2 * mid1 * (base_n2 // 16) * 512
              + (mid1 * 64 if spec.mid_bias else 0) + (base_n2 * 4 if spec.bias else 0),
        "L0A": 2 * m1 * max(base_k1, base_k2) * 512,
        "L0B": 2 * max(base_k1 * mid1, base_k2 * (base_n2 // 16)) * 512,
        "L0C": m1 * (mid1 + base_n2 // 16) * 1024,
        "BT": max(mid1 * 64 if spec.mid_bias else 0, base_n2 * 4 if spec.bias else 0),
    }


def _chain_variant(spec: Conv2dSpec, profile: Profile, log: OptLog, search: bool = False) -> Variant:
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
                if _fits(profile, chain_buffers(spec, **p)) is None:
                    best = p
                    break
            if best:
                break
        if best:
            break
    if best is None:
        raise KilnError("tiling", spec.name, f"no chained tiling fits {profile.name} (fusion should have refused it)")
    best["slab_rows"] = max(1, max(r for *_, r in conv_tile_rows(spec, best["base_m"])))
    if spec.vector_epilogue:  # the Vector-core pass over the output, as for a single conv (never on chip here)
        numel = spec.n * CO1 * spec.ho * spec.wo * C0
        best["epi_tile"] = _share128(numel, profile.cores_for("vector"),
                                     (profile.capacity["UB"] // (2 * 3 * 2)) // 128 * 128)
        log.add("tiling", spec.name, f"epilogue=vector_core,epi_tile={best['epi_tile']}", "vector_epilogue",
                coupled=profile.coupled)
    if search:
        from ..select.search import search_chain
        best = search_chain(spec, best, profile, log)
    bufs = {k: v for k, v in chain_buffers(spec, best["base_m"], best["base_k1"], best["c1_step"], best["base_n2"],
                                           best["base_k2"]).items()}
    if spec.vector_epilogue:
        bufs["UB"] = 2 * 3 * best["epi_tile"] * 2
    return Variant("conv2d_cube_img2col", best, spec.n * ceil(M / best["base_m"]) * best["n_split"], bufs)


def _conv_variant(spec: Conv2dSpec, profile: Profile, log: OptLog, search: bool = False) -> Variant:
    if spec.mid:
        return _chain_variant(spec, profile, log, search)
    M, C1, CO1 = spec.ho * spec.wo, c1(spec.cin), c1(spec.cout)
    K1 = C1 * spec.kh * spec.kw
    cores = profile.cores_for("cube")
    best, limit = None, None
    base_n = min(256, CO1 * 16)
    while best is None:  # largest N tile first, then M tile, then channel blocks per L1 chunk
        for base_m in (128, 64, 32, 16):
            base_m = min(base_m, _r16(M))
            base_k1 = min(4, K1)
            for c1_step in range(C1, 0, -1):
                bufs = _conv_buffers(spec, base_m, base_n, base_k1, c1_step)
                limit = _fits(profile, bufs)
                if limit is None:
                    best = dict(base_m=base_m, base_n=base_n, base_k1=base_k1, c1_step=c1_step)
                    break
            if best:
                break
        if best is None:
            if base_n == 16:
                raise KilnError("tiling", spec.name, f"no tile fits {limit} of {profile.name} even at 16x16 with one "
                                f"channel block: {_conv_buffers(spec, 16, 16, 1, 1)}")
            base_n = _half16(base_n)
            log.add("tiling", spec.name, f"base_n={base_n}", "tile_shrunk", limit=limit)
    # Spread over the cores: narrower N tiles first (keeps the img2col reuse), then M.
    def blocks(v):
        return spec.n * ceil(M / v["base_m"]) * ceil(CO1 * 16 / v["base_n"])
    before = blocks(best)
    while blocks(best) < cores and best["base_n"] > 64:
        best["base_n"] = _half16(best["base_n"])
    while blocks(best) < cores and best["base_m"] > 32:
        best["base_m"] = _half16(best["base_m"])
    if blocks(best) != before:
        log.add("tiling", spec.name, f"base_m={best['base_m']},base_n={best['base_n']}", "balance_cores",
                blocks_before=before, blocks=blocks(best), cores=cores)
    best["slab_rows"] = max(1, max(r for *_, r in conv_tile_rows(spec, best["base_m"])))
    epi_ub = 0
    if spec.vector_epilogue and profile.coupled:  # L0C -> UB on the same core: acc32, r16, r32, y16 per block
        best["on_chip"] = 1
        log.add("tiling", spec.name, "epilogue=on_chip", "vector_epilogue", coupled=True)
    elif spec.vector_epilogue:  # the Vector-core pass over the output: y (and residual) in, y out, ping-pong
        numel = spec.n * c1(spec.cout) * spec.ho * spec.wo * C0
        vcores = profile.cores_for("vector")
        tile = _share128(numel, vcores, (profile.capacity["UB"] // (2 * 3 * 2)) // 128 * 128)
        best["epi_tile"] = tile
        epi_ub = 2 * 3 * tile * 2
        log.add("tiling", spec.name, f"epilogue=vector_core,epi_tile={tile}", "vector_epilogue",
                coupled=profile.coupled)
    if search:  # the rule's tiling is the baseline the search must beat
        from ..select.search import search_conv
        best = search_conv(spec, best, profile, log, _conv_buffers)
    bufs = _conv_buffers(spec, best["base_m"], best["base_n"], best["base_k1"], best["c1_step"],
                         best.get("l1_buffers", 2))
    if epi_ub:
        bufs["UB"] = epi_ub
    if best.get("on_chip"):
        bufs["UB"] = on_chip_ub(best["base_m"])
    return Variant("conv2d_cube_img2col", best, blocks(best), bufs)


def on_chip_ub(base_m: int) -> int:
    """UB bytes of the on-chip conv epilogue: fp32 tile, fp16 and fp32 residual, fp16 result (one channel block)."""
    return base_m * 16 * (4 + 2 + 4 + 2)


def _conv_mte2(spec: Conv2dSpec, v: Variant) -> int:
    p = v.params
    if spec.mid:  # per M tile: the window conv's chunks for all mid channels, then the 1x1 weights per N chunk
        mid1, CO1, total = c1(spec.mid), c1(spec.cout), 0
        split = p.get("n_split", 1)
        for _, _, _, rows in conv_tile_rows(spec, p["base_m"]):
            for c1a in range(0, c1(spec.cin), p["c1_step"]):  # the window conv, once per N split
                c1n = min(p["c1_step"], c1(spec.cin) - c1a)
                total += split * (c1n * rows * spec.w * 32 + c1n * spec.kh * spec.kw * mid1 * 512)
            total += split * mid1 * 64 if spec.mid_bias else 0
            for n1 in range(0, CO1, p["base_n2"] // 16):
                n1c = min(p["base_n2"] // 16, CO1 - n1)
                total += mid1 * n1c * 512 + (n1c * 64 if spec.bias else 0)
        epilogue = spec.output().nbytes * (2 if spec.residual else 1) if spec.vector_epilogue else 0
        return total * spec.n + epilogue
    CO1, C1 = c1(spec.cout), c1(spec.cin)
    n_tiles = [min(p["base_n"] // 16, CO1 - n1) for n1 in range(0, CO1, p["base_n"] // 16)]
    total = 0
    second = spec.second() if spec.cin2 else None
    rows2 = conv_tile_rows(second, p["base_m"]) if second else []
    for mi, (_, _, _, rows) in enumerate(conv_tile_rows(spec, p["base_m"])):
        for n1c in n_tiles:
            for c1a in range(0, C1, p["c1_step"]):
                c1n = min(p["c1_step"], C1 - c1a)
                total += c1n * rows * spec.w * 32 + c1n * spec.kh * spec.kw * n1c * 512
            if second:  # the second source's channel blocks: its rows and its 1x1 weights
                for c1a in range(0, c1(second.cin), p["c1_step"]):
                    c1n = min(p["c1_step"], c1(second.cin) - c1a)
                    total += c1n * rows2[mi][3] * second.w * 32 + c1n * n1c * 512
            total += n1c * 64 if spec.bias else 0
    epilogue = 0
    if p.get("on_chip"):  # the tile stays on chip: only the residual is read
        epilogue = spec.output().nbytes if spec.residual else 0
    elif spec.vector_epilogue:  # the Vector pass reads the conv output (and the residual) back
        epilogue = spec.output().nbytes * (2 if spec.residual else 1)
    return total * spec.n + epilogue


# ---------------------------------------------------------------- conv2d (Winograd F(m x m, 3 x 3))

WINOGRAD_TILES = (2, 4)


def winograd_legal(spec: Conv2dSpec) -> str | None:
    """Why Winograd cannot implement this conv, or None (3x3, stride 1, dilation 1; any padding)."""
    if spec.cin2:
        return "a second source is accumulated into its L0C"
    if spec.mid:
        return "a 1x1 conv is chained after it"
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
        return _r16(self.p)


def winograd_geometry(spec: Conv2dSpec, tile: int) -> WinogradGeometry:
    th, tw = ceil(spec.ho / tile), ceil(spec.wo / tile)
    return WinogradGeometry(tile, th, tw, spec.n * th * tw)


def winograd_tile_waste(spec: Conv2dSpec, tile: int) -> float:
    """Share of computed output pixels that fall outside the image (partial tiles at the edges)."""
    g = winograd_geometry(spec, tile)
    return 1.0 - (spec.ho * spec.wo) / (g.th * g.tw * tile * tile)


def _winograd_ub(tile: int, tb: int, residual: bool, bias: bool) -> tuple[int, int]:
    """UB bytes of the input-transform and the output-transform passes (the template's allocations)."""
    alpha = tile + 2
    xi, plane32 = alpha * alpha, tb * 16 * 4
    raw = alpha * (tb * tile + 2) * 32
    p1 = 2 * raw + 2 * xi * plane32 + alpha * plane32 + 2 * xi * tb * 32
    out_row = tile * tb * tile * 32
    p3 = 2 * xi * plane32 + tile * alpha * plane32 + tile * tile * plane32 + alpha * plane32 + 2 * out_row
    p3 += (2 * 256 if bias else 0) + (2 * out_row if residual else 0)
    return p1, p3


def _winograd_variant(spec: Conv2dSpec, profile: Profile, tile: int, log: OptLog | None = None,
                      search: bool = False) -> Variant | None:
    """The Winograd variant with tile `tile`, or None if no tile batch fits UB."""
    g = winograd_geometry(spec, tile)
    C1, CO1 = c1(spec.cin), c1(spec.cout)
    vcores, ccores = profile.cores_for("vector"), profile.cores_for("cube")
    tb = None
    for cand in range(min(64, ceil(g.tw / 4) * 4), 0, -4):  # widest row chunk whose buffers fit
        if max(_winograd_ub(tile, cand, spec.residual, spec.bias)) <= profile.capacity["UB"]:
            tb = cand
            break
    if tb is None:
        return None
    rows = spec.n * g.th * ceil(g.tw / tb)  # Vector blocks before splitting channels
    c1_block = ceil(C1 / min(C1, ceil(vcores / rows)))    # enough channel groups to cover the Vector cores
    co1_block = ceil(CO1 / min(CO1, ceil(vcores / rows)))
    base_m, base_n, base_k1 = min(128, _r16(g.p)), min(256, CO1 * 16), min(4, C1)

    def gemm_bufs(bm, bn, step):
        return {"L1": 2 * step * bm * 32 + 2 * step * (bn // 16) * 512, "L0A": 2 * (bm // 16) * base_k1 * 512,
                "L0B": 2 * base_k1 * (bn // 16) * 512, "L0C": (bm // 16) * (bn // 16) * 1024}

    def gemm_blocks(bm, bn):
        return g.positions * ceil(g.p / bm) * ceil(CO1 * 16 / bn)
    while _fits(profile, gemm_bufs(base_m, base_n, 1)) and base_n > 16:
        base_n = _half16(base_n)
    while gemm_blocks(base_m, base_n) < ccores and base_n > 64:
        base_n = _half16(base_n)
    c1_step = next(st for st in range(C1, 0, -1) if _fits(profile, gemm_bufs(base_m, base_n, st)) is None)
    params = dict(tile=tile, tile_batch=tb, c1_block=c1_block, co1_block=co1_block, base_m=base_m, base_n=base_n,
                  base_k1=base_k1, c1_step=c1_step)
    if search:
        from ..select.search import search_winograd

        def gemm_buffers(bm, bn, bk, step):
            return {"L1": 2 * step * bm * 32 + 2 * step * (bn // 16) * 512, "L0A": 2 * (bm // 16) * bk * 512,
                    "L0B": 2 * bk * (bn // 16) * 512, "L0C": (bm // 16) * (bn // 16) * 1024}
        params = search_winograd(spec, params, profile, log, gemm_buffers,
                                 lambda t: max(_winograd_ub(tile, t, spec.residual, spec.bias)))
    bufs = {"L1": 2 * params["c1_step"] * params["base_m"] * 32 + 2 * params["c1_step"] * (params["base_n"] // 16) * 512,
            "L0A": 2 * (params["base_m"] // 16) * params["base_k1"] * 512,
            "L0B": 2 * params["base_k1"] * (params["base_n"] // 16) * 512,
            "L0C": (params["base_m"] // 16) * (params["base_n"] // 16) * 1024,
            "UB": max(_winograd_ub(tile, params["tile_batch"], spec.residual, spec.bias))}
    return Variant("conv2d_winograd", params, gemm_blocks(params["base_m"], params["base_n"]), bufs)


def winograd_weight_shape(spec: Conv2dSpec, tile: int) -> tuple[int, int, int, int]:
    return ((tile + 2) ** 2 * c1(spec.cin), c1(spec.cout), C0, C0)


# ---------------------------------------------------------------- gemm (Cube)

def _gemm_buffers(spec: GemmSpec, base_m: int, base_n: int, base_k1: int, k1_step: int) -> dict[str, int]:
    return {
        "L1": 2 * k1_step * (base_m // 16) * 512 + 2 * k1_step * (base_n // 16) * 512 + (base_n * 4 if spec.bias else 0),
        "L0A": 2 * (base_m // 16) * base_k1 * 512,
        "L0B": 2 * base_k1 * (base_n // 16) * 512,
        "L0C": (base_m // 16) * (base_n // 16) * 1024,
        "BT": base_n * 4 if spec.bias else 0,
    }


def _gemm_variant(spec: GemmSpec, profile: Profile, log: OptLog, search: bool = False) -> Variant:
    K1, N1 = c1(spec.k), c1(spec.n)
    cores = profile.cores_for("cube")
    base_m, base_n, base_k1 = min(128, _r16(spec.m)), min(256, N1 * 16), min(4, K1)

    def blocks(bm, bn):
        return ceil(spec.m / bm) * ceil(N1 * 16 / bn)
    before = blocks(base_m, base_n)
    while blocks(base_m, base_n) < cores and base_n > 64:
        base_n = _half16(base_n)
    while blocks(base_m, base_n) < cores and base_m > 32:
        base_m = _half16(base_m)
    if blocks(base_m, base_n) != before:
        log.add("tiling", spec.name, f"base_m={base_m},base_n={base_n}", "balance_cores",
                blocks_before=before, blocks=blocks(base_m, base_n), cores=cores)
    while spec.split and spec.split % base_n:  # an N tile writes into one sibling's result
        base_n -= 16
    k1_step = None
    for s in range(ceil(K1 / base_k1) * base_k1, 0, -base_k1):
        if _fits(profile, _gemm_buffers(spec, base_m, base_n, base_k1, s)) is None:
            k1_step = min(s, K1) if s >= K1 else s
            break
    if k1_step is None:
        raise KilnError("tiling", spec.name, f"no K step fits L1 of {profile.name}")
    p = dict(base_m=base_m, base_n=base_n, base_k1=base_k1, k1_step=k1_step)
    if search:  # the rule's tiling is the baseline the search must beat
        from ..select.search import search_gemm
        p = search_gemm(spec, p, profile, log, _gemm_buffers)
    return Variant("gemm_cube", p, blocks(p["base_m"], p["base_n"]),
                   _gemm_buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["k1_step"]))


def _gemm_mte2(spec: GemmSpec, v: Variant) -> int:
    p = v.params
    K1, N1 = c1(spec.k), c1(spec.n)
    total = 0
    for m0 in range(0, spec.m, p["base_m"]):
        m = min(p["base_m"], spec.m - m0)
        for n1 in range(0, N1, p["base_n"] // 16):
            n1c = min(p["base_n"] // 16, N1 - n1)
            for k1a in range(0, K1, p["k1_step"]):
                k1n = min(p["k1_step"], K1 - k1a)
                cols = min(k1n * 16, spec.k - k1a * 16)
                total += m * cols * 2 + k1n * n1c * 512
            total += n1c * 64 if spec.bias else 0
    return total


# ---------------------------------------------------------------- depthwise (Vector)

def _dw_slab_rows(spec: DwConv2dSpec, rows_out: int) -> int:
    return (rows_out - 1) * spec.sh + (spec.kh - 1) * spec.dh + 1


def _dw_buffers(spec: DwConv2dSpec, rows_per_block: int) -> dict[str, int]:
    wp = spec.w + spec.pl + spec.pr
    taps = spec.kh * spec.kw
    ub = (_r32(_dw_slab_rows(spec, rows_per_block) * wp * 32) + _r32(taps * 32) + _r32(taps * 64) + taps * 256
          + (64 + 256 if spec.bias else 0) + 2 * _r32(spec.wo * 64) + 2 * _r32(spec.wo * 32))
    return {"UB": ub}


def _dw_variant(spec: DwConv2dSpec, profile: Profile, log: OptLog) -> Variant:
    cores = profile.cores_for("vector")
    planes = spec.n * c1(spec.c)
    rpb = ceil(spec.ho / max(1, ceil(cores / planes)))
    while rpb > 1 and _fits(profile, _dw_buffers(spec, rpb)):
        rpb = ceil(rpb / 2)
    limit = _fits(profile, _dw_buffers(spec, rpb))
    if limit:
        raise KilnError("tiling", spec.name, f"one output row does not fit {limit} of {profile.name} "
                        f"(input width {spec.w} too large for the Vector kernel)")
    blocks = planes * ceil(spec.ho / rpb)
    return Variant("dwconv2d_vector", {"rows_per_block": rpb}, blocks, _dw_buffers(spec, rpb))


def _dw_mte2(spec: DwConv2dSpec, v: Variant) -> int:
    rpb = v.params["rows_per_block"]
    total = 0
    for r0 in range(0, spec.ho, rpb):
        rows_out = min(rpb, spec.ho - r0)
        lo = r0 * spec.sh - spec.pt
        hi = lo + _dw_slab_rows(spec, rows_out)  # exclusive
        valid = max(0, min(hi, spec.h) - max(lo, 0))
        total += valid * spec.w * 32 + spec.kh * spec.kw * 32 + (64 if spec.bias else 0)
    return total * spec.n * c1(spec.c)


# ---------------------------------------------------------------- dense conv on the Vector unit

def vector_conv_legal(spec: Conv2dSpec) -> str | None:
    """Why conv2d_vector cannot implement the conv (None: it can)."""
    if spec.cin2:
        return "a second source accumulates in the Cube's L0C"
    if spec.mid:
        return "a chain keeps its intermediate in the Cube's L1"
    if spec.dtype != "fp16":
        return f"the build's Cube weights are packed as {spec.dtype}; the Vector kernel reads fp16"
    return None


def _vector_conv_geometry(spec: Conv2dSpec, rows_per_block: int) -> tuple[int, int]:
    """(band rows of a block, band row width padded to 16-pixel groups) of conv2d_vector."""
    wpp = _r16(spec.w + spec.pl + spec.pr)
    return (rows_per_block - 1) * spec.sh + (spec.kh - 1) * spec.dh + 1, wpp


def vector_conv_buffers(spec: Conv2dSpec, rows_per_block: int) -> dict[str, int]:
    """UB of conv2d_vector (templates/conv2d_vector.cpp.j2, in its allocation order)."""
    slab_rows, wpp = _vector_conv_geometry(spec, rows_per_block)
    plane, fractals, row = slab_rows * wpp, c1(spec.cin) * spec.kh * spec.kw, spec.wo * 16
    ub = (2 * _r32(c1(spec.cin) * plane * 32) + _r32(plane * 32) + fractals * 512 + fractals * 1024
          + spec.kh * spec.kw * 256 + _r32(rows_per_block * row * 4) + _r32(row * 4) + 2 * _r32(row * 2)
          + (64 + 256 if spec.bias else 0) + (_r32(rows_per_block * row * 2) if spec.residual else 0))
    return {"UB": ub}


def _vector_conv_variant(spec: Conv2dSpec, profile: Profile) -> Variant | None:
    """Bands of output rows small enough to spread the blocks over the Vector cores; None if one row of
    every input channel does not fit UB."""
    cores = profile.cores_for("vector")
    planes = spec.n * c1(spec.cout)
    rpb = ceil(spec.ho / max(1, ceil(cores / planes)))
    while rpb > 1 and _fits(profile, vector_conv_buffers(spec, rpb)):
        rpb = ceil(rpb / 2)
    if _fits(profile, vector_conv_buffers(spec, rpb)):
        return None
    return Variant("conv2d_vector", {"rows_per_block": rpb}, planes * ceil(spec.ho / rpb),
                   vector_conv_buffers(spec, rpb))


def _vector_conv_mte2(spec: Conv2dSpec, v: Variant) -> int:
    rpb = v.params["rows_per_block"]
    fractals = c1(spec.cin) * spec.kh * spec.kw
    total = 0
    for r0 in range(0, spec.ho, rpb):
        rows_out = min(rpb, spec.ho - r0)
        lo = r0 * spec.sh - spec.pt
        hi = lo + _vector_conv_geometry(spec, rows_out)[0]
        valid = max(0, min(hi, spec.h) - max(lo, 0))
        total += (c1(spec.cin) * valid * spec.w * 32 + fractals * 512 + (64 if spec.bias else 0)
                  + (rows_out * spec.wo * 32 if spec.residual else 0))
    return total * spec.n * c1(spec.cout)


# ---------------------------------------------------------------- elementwise (Vector)

def _elt_variant(spec: EltwiseSpec, profile: Profile, log: OptLog) -> Variant:
    cores = profile.cores_for("vector")
    if spec.op == "gelu":
        # fp16 x and z ping-pong (2 x 2 x 2 B) + four fp32 temporaries (16 B) per element
        per_elem = 8 + 16
        tile = _share128(spec.numel, cores, (profile.capacity["UB"] // per_elem) // 128 * 128)
        return Variant("gelu_vector", {"tile_elems": tile}, choose_blocks_eltwise(spec.numel, tile, profile),
                       {"UB": per_elem * tile})
    tensors = 3 if spec.op in ("add", "mul") else 2  # ping-pong buffers of x (and y) and z
    max_tile = (profile.capacity["UB"] // (2 * tensors * 2)) // 128 * 128
    tile = _share128(spec.numel, cores, max_tile)
    return Variant("eltwise_vector", {"tile_elems": tile}, choose_blocks_eltwise(spec.numel, tile, profile),
                   {"UB": 2 * tensors * tile * 2})


def choose_blocks_eltwise(numel: int, tile: int, profile: Profile) -> int:
    """Vector blocks of a streaming kernel: one per tile, at most one per Vector core."""
    return min(profile.cores_for("vector"), ceil(numel / tile))


def _elt_mte2(spec: EltwiseSpec, v: Variant) -> int:
    return spec.numel * 2 * (2 if spec.op in ("add", "mul") else 1)


# ---------------------------------------------------------------- pooling (Vector)

def _maxpool_buffers(spec: Pool2dSpec, rows_per_block: int) -> dict[str, int]:
    wp = spec.w + spec.pl + spec.pr
    slab = ((rows_per_block - 1) * spec.sh + spec.kh) * wp * 32
    return {"UB": _r32(slab) + 2 * _r32(spec.wo * 32)}


def _pool_variant(spec: Pool2dSpec, profile: Profile, log: OptLog) -> Variant:
    cores = profile.cores_for("vector")
    planes = spec.n * c1(spec.c)
    if family_of(spec) == "global_avgpool_vector":
        # in ping/pong (fp16) + the fp32 copy: 2*32 + 64 bytes per pixel, plus 96 bytes of sums.
        chunk = max(1, min(spec.h * spec.w, (profile.capacity["UB"] - 256) // 128))
        return Variant("global_avgpool_vector", {"chunk_pixels": chunk}, planes,
                       {"UB": 2 * chunk * 32 + chunk * 64 + 64 + 32})
    rpb = ceil(spec.ho / max(1, ceil(cores / planes)))
    while rpb > 1 and _fits(profile, _maxpool_buffers(spec, rpb)):
        rpb = ceil(rpb / 2)
    limit = _fits(profile, _maxpool_buffers(spec, rpb))
    if limit:
        raise KilnError("tiling", spec.name, f"one output row does not fit {limit} of {profile.name}")
    return Variant("maxpool2d_vector", {"rows_per_block": rpb}, planes * ceil(spec.ho / rpb),
                   _maxpool_buffers(spec, rpb))


def _pool_mte2(spec: Pool2dSpec, v: Variant) -> int:
    if v.family == "global_avgpool_vector":
        return spec.n * c1(spec.c) * spec.h * spec.w * 32
    rpb, total = v.params["rows_per_block"], 0
    for r0 in range(0, spec.ho, rpb):
        rows_out = min(rpb, spec.ho - r0)
        lo = r0 * spec.sh - spec.pt
        hi = lo + (rows_out - 1) * spec.sh + spec.kh
        total += max(0, min(hi, spec.h) - max(lo, 0)) * spec.w * 32
    return total * spec.n * c1(spec.c)


# ---------------------------------------------------------------- row ops: softmax, layernorm (Vector)

def _row_buffers(spec: RowSpec, rows_per_tile: int) -> dict[str, int]:
    L = spec.length
    partials = _r32(4 * ceil(L / 64))
    padded = ceil(L / 64) * 64
    # in and out ping-pong (fp16), fp32 row (+ squares for layernorm), partials
    ub = 2 * _r32(rows_per_tile * L * 2) * 2 + _r32(padded * 4) + max(32, partials)
    if spec.op == "layernorm":
        ub += _r32(padded * 4) + 2 * _r32(L * 4)  # squares, gamma, beta
    return {"UB": ub}


def _row_variant(spec: RowSpec, profile: Profile, log: OptLog) -> Variant:
    if spec.length > 4096:
        raise KilnError("tiling", spec.name, f"rows of {spec.length} > 4096 values are not supported yet")
    cores = profile.cores_for("vector")
    # rows start 32-byte aligned in UB only when a row is a multiple of 16 fp16 values
    rpt = max(1, ceil(spec.rows / cores)) if spec.length % 16 == 0 else 1
    while rpt > 1 and _fits(profile, _row_buffers(spec, rpt)):
        rpt = ceil(rpt / 2)
    if _fits(profile, _row_buffers(spec, rpt)):
        raise KilnError("tiling", spec.name, f"one row of {spec.length} does not fit UB of {profile.name}")
    return Variant(f"{spec.op}_vector", {"rows_per_tile": rpt}, row_blocks(spec, rpt, profile), _row_buffers(spec, rpt))


def row_blocks(spec: RowSpec, rows_per_tile: int, profile: Profile) -> int:
    """Vector blocks of a row kernel: one per tile of rows, at most one per Vector core."""
    return min(profile.cores_for("vector"), ceil(spec.rows / rows_per_tile))


def _row_mte2(spec: RowSpec, v: Variant) -> int:
    blocks = v.blocks
    tiles = ceil(spec.rows / v.params["rows_per_tile"])
    extra = 8 * spec.length * blocks if spec.op == "layernorm" else 0  # gamma and beta per block
    return spec.rows * spec.length * 2 + (extra if tiles else 0)


# ---------------------------------------------------------------- batched gemm (Cube), transpose (MTE)

def _bgemm_buffers(spec: BatchedGemmSpec, base_m: int, base_n: int, base_k1: int, k1_step: int) -> dict[str, int]:
    return {
        "L1": 2 * k1_step * (base_m // 16) * 512 + 2 * k1_step * (base_n // 16) * 512,
        "L0A": 2 * (base_m // 16) * base_k1 * 512,
        "L0B": 2 * base_k1 * (base_n // 16) * 512,
        "L0C": (base_m // 16) * (base_n // 16) * 1024,
    }


def _bgemm_variant(spec: BatchedGemmSpec, profile: Profile, log: OptLog) -> Variant:
    K1 = c1(spec.k)
    base_m, base_n, base_k1 = min(128, _r16(spec.m)), min(256, _r16(spec.n)), min(4, K1)
    k1_step = None
    for s in range(ceil(K1 / base_k1) * base_k1, 0, -base_k1):
        if _fits(profile, _bgemm_buffers(spec, base_m, base_n, base_k1, s)) is None:
            k1_step = s
            break
    if k1_step is None:
        raise KilnError("tiling", spec.name, f"no K step fits L1 of {profile.name}")
    blocks = spec.batch * ceil(spec.m / base_m) * ceil(spec.n / base_n)
    p = dict(base_m=base_m, base_n=base_n, base_k1=base_k1, k1_step=k1_step)
    return Variant("batched_gemm_cube", p, blocks, _bgemm_buffers(spec, base_m, base_n, base_k1, k1_step))


def _bgemm_mte2(spec: BatchedGemmSpec, v: Variant) -> int:
    p, K1, total = v.params, c1(spec.k), 0
    for m0 in range(0, spec.m, p["base_m"]):
        m = min(p["base_m"], spec.m - m0)
        for n0 in range(0, spec.n, p["base_n"]):
            n = min(p["base_n"], spec.n - n0)
            for k1a in range(0, K1, p["k1_step"]):
                cols = min(p["k1_step"] * 16, spec.k - k1a * 16)
                total += m * cols * 2 + n * cols * 2
    return total * spec.batch


def _transpose_variant(spec: TransposeSpec, profile: Profile, log: OptLog) -> Variant:
    plane = spec.d2 * spec.d3 * 2
    if 2 * plane > profile.capacity["UB"]:
        raise KilnError("tiling", spec.name, f"one {spec.d2}x{spec.d3} plane does not fit UB twice")
    cores = profile.cores_for("vector")
    planes = spec.d0 * spec.d1
    ppb = max(1, ceil(planes / cores))
    return Variant("transpose_mte", {"planes_per_block": ppb}, ceil(planes / ppb), {"UB": 2 * _r32(plane)})


def _transpose_mte2(spec: TransposeSpec, v: Variant) -> int:
    return spec.d0 * spec.d1 * spec.d2 * spec.d3 * 2


# ---------------------------------------------------------------- attention (Cube + Vector, flash)

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
        "UB": (_r32(base_q * kvp * 4) + _r32(base_q * kvp * 2) + _r32(base_q * 64 * 4) + 2 * _r32(base_q * d16 * 4)
               + _r32(base_q * d16 * 2) + 6 * _r32(base_q * 4) + nz
               + _r32(kvp * 2) + _r32(kvp * 4)),  # a mask row (fp16, widened), if the kernel has one
    }


def attention_capacity_problem(d: int, profile: Profile) -> str:
    """Why even the smallest attention_flash tile (16 q rows, 16 kv rows) does not fit the profile, or ''."""
    bufs = attention_buffers(d, 16, 16, profile.coupled)
    over = _fits(profile, bufs)
    if over is None:
        return ""
    return f"head dim {d}: the smallest tile needs {bufs[over]} B of {over}, {profile.name} has {profile.capacity[over]} B"


def _attention_variant(spec: AttentionSpec, profile: Profile, log: OptLog) -> Variant:
    """Every (q tile, kv tile) that fits the buffers, ranked by the cost model's cycles (fewer blocks than Cube
    cores leave cores idle; longer kv tiles mean fewer handovers but larger Vector passes)."""
    from ..cost import model as costmodel
    problem = attention_capacity_problem(spec.d, profile)
    if problem:
        raise KilnError("tiling", spec.name, problem)
    cands = []
    for bq in ATTENTION_TILES:
        if bq > _r16(spec.q) and bq > 16:
            continue
        for bkv in ATTENTION_TILES + (256,):
            if (bkv > _r16(spec.kv) and bkv > 16) or _fits(profile, attention_buffers(spec.d, bq, bkv,
                                                                                      profile.coupled)):
                continue
            # coupled: S and P.V stay on chip; split (910B): the rows go over the Cube core's two Vector cores
            p = {"base_q": bq, "base_kv": bkv, **({"on_chip": 1} if profile.coupled else {"vec_split": 2})}
            cands.append((costmodel.predict(spec, "attention_flash", p, profile, sample=True).cycles, -bq, -bkv, p))
    cycles, _, _, best = min(cands, key=lambda c: c[:3])
    log.add("search", spec.name, f"base_q={best['base_q']},base_kv={best['base_kv']}", "cost_model",
            candidates=len(cands), predicted_cycles=round(cycles))
    blocks = spec.batch * spec.heads * ceil(spec.q / best["base_q"])
    return Variant("attention_flash", best, blocks, attention_buffers(spec.d, best["base_q"], best["base_kv"],
                                                                     profile.coupled))


def _attention_mte2(spec: AttentionSpec, v: Variant) -> int:
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


_RULES = {"conv2d": (_conv_variant, _conv_mte2), "gemm": (_gemm_variant, _gemm_mte2),
          "dwconv2d": (_dw_variant, _dw_mte2), "eltwise": (_elt_variant, _elt_mte2),
          "pool2d": (_pool_variant, _pool_mte2), "softmax": (_row_variant, _row_mte2),
          "layernorm": (_row_variant, _row_mte2), "bgemm": (_bgemm_variant, _bgemm_mte2),
          "transpose": (_transpose_variant, _transpose_mte2), "attention": (_attention_variant, _attention_mte2)}


TUNABLE = {"conv2d_cube_img2col": ("base_m", "base_n", "base_k1", "c1_step"), "conv2d_vector": ("rows_per_block",),
           "gemm_cube": ("base_m", "base_n", "base_k1", "k1_step"),
           "conv2d_winograd": ("tile_batch", "c1_block", "co1_block", "base_m", "base_n", "base_k1", "c1_step")}


# A whole searched tiling of a direct conv sets these besides TUNABLE; the size decides SIZE_DERIVED.
SEARCHED_EXTRA = {"conv2d_cube_img2col": ("l1_buffers", "base_n2", "base_k2", "n_split")}
SIZE_DERIVED = ("slab_rows", "epi_tile", "on_chip")


def variant_from_params(spec: Opspec, profile: Profile, family: str, params: dict, source: str,
                        whole: bool = False) -> Variant:
    """The variant of `family` with the tunable parameters given by a pin or a tuning record (checked). whole:
    `params` is a baked kernel's whole tiling, which a generic plan borrows for another input size
    (codegen/shape_buckets.py): it may also set SEARCHED_EXTRA (a chain's has no base_n), and what the size
    decides (SIZE_DERIVED) is recomputed here, as the fit to this spec's buffers is checked."""
    kind_of = {"gemm_cube": "gemm", "conv2d_cube_img2col": "conv2d", "conv2d_winograd": "conv2d",
               "conv2d_vector": "conv2d"}
    if kind_of.get(family) != spec.kind:
        raise KilnError("tiling", spec.name, f"{source}: family {family!r} cannot implement a {spec.kind} kernel; "
                        f"tunable: {', '.join(f'{f} ({k})' for f, k in kind_of.items())}")
    want = set(TUNABLE[family]) | ({"tile"} if family == "conv2d_winograd" else set())
    if whole:
        params = {k: v for k, v in params.items() if k not in SIZE_DERIVED}
        chain = getattr(spec, "mid", 0) > 0
        need = (want - {"base_n"}) | {"base_n2", "base_k2", "n_split"} if chain else want
        if not need <= set(params) <= want | set(SEARCHED_EXTRA.get(family, ())):
            raise KilnError("tiling", spec.name, f"{source}: tiling {sorted(params)} is not a whole tiling of "
                            f"{family} (needs {sorted(need)})")
    elif set(params) != want:
        raise KilnError("tiling", spec.name, f"{source}: tiling {sorted(params)} must set exactly {sorted(want)}")
    bad = sorted(k for k, v in params.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1)
    if bad:
        raise KilnError("tiling", spec.name, f"{source}: {', '.join(bad)} must be positive integers")
    for key in ("base_m", "base_n"):
        if key in params and params[key] % 16:
            raise KilnError("tiling", spec.name, f"{source}: {key}={params[key]} is not a multiple of 16")
    if family == "conv2d_vector":
        if vector_conv_legal(spec):
            raise KilnError("tiling", spec.name, f"{source}: conv2d_vector cannot implement this conv: "
                            f"{vector_conv_legal(spec)}")
        p = dict(params)
        p["rows_per_block"] = min(p["rows_per_block"], spec.ho)
        bufs = vector_conv_buffers(spec, p["rows_per_block"])
        blocks = spec.n * c1(spec.cout) * ceil(spec.ho / p["rows_per_block"])
    elif family == "gemm_cube":
        base = _gemm_variant(spec, profile, OptLog())
        p = dict(base.params, **params)
        if spec.split and spec.split % p["base_n"]:
            raise KilnError("tiling", spec.name, f"{source}: base_n={p['base_n']} must divide the {spec.split} "
                            f"columns of each sibling result")
        bufs = _gemm_buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["k1_step"])
        blocks = ceil(spec.m / p["base_m"]) * ceil(c1(spec.n) * 16 / p["base_n"])
    elif family == "conv2d_winograd":
        if winograd_legal(spec) or params["tile"] not in WINOGRAD_TILES:
            raise KilnError("tiling", spec.name, f"{source}: Winograd F({params['tile']},3) cannot implement this "
                            f"conv: {winograd_legal(spec) or 'tile must be 2 or 4'}")
        base = _winograd_variant(spec, profile, params["tile"])
        p = dict(base.params, **params)
        if p["tile_batch"] % 4:
            raise KilnError("tiling", spec.name, f"{source}: tile_batch={p['tile_batch']} is not a multiple of 4")
        bufs = {"L1": 2 * p["c1_step"] * p["base_m"] * 32 + 2 * p["c1_step"] * (p["base_n"] // 16) * 512,
                "L0A": 2 * (p["base_m"] // 16) * p["base_k1"] * 512, "L0B": 2 * p["base_k1"] * (p["base_n"] // 16) * 512,
                "L0C": (p["base_m"] // 16) * (p["base_n"] // 16) * 1024,
                "UB": max(_winograd_ub(p["tile"], p["tile_batch"], spec.residual, spec.bias))}
        g = winograd_geometry(spec, p["tile"])
        blocks = g.positions * ceil(g.p / p["base_m"]) * ceil(c1(spec.cout) * 16 / p["base_n"])
    elif spec.kind == "conv2d" and spec.mid:  # a chained conv's tiling (tuning record, kernel-list pin)
        base = _chain_variant(spec, profile, OptLog())
        p = dict(base.params, **params)
        p["slab_rows"] = max(1, max(r for *_, r in conv_tile_rows(spec, p["base_m"])))
        bufs = dict(base.buffers, **chain_buffers(spec, p["base_m"], p["base_k1"], p["c1_step"], p["base_n2"],
                                                  p["base_k2"]))
        n_chunks = ceil(c1(spec.cout) / (p["base_n2"] // 16))
        if not 1 <= p["n_split"] <= n_chunks:
            raise KilnError("tiling", spec.name, f"{source}: n_split={p['n_split']} must be 1..{n_chunks} (the 1x1's "
                            f"N chunks of base_n2={p['base_n2']})")
        blocks = spec.n * ceil(spec.ho * spec.wo / p["base_m"]) * p["n_split"]
    else:
        base = _conv_variant(spec, profile, OptLog())
        p = dict(base.params, **params)
        p["slab_rows"] = max(1, max(r for *_, r in conv_tile_rows(spec, p["base_m"])))
        if p.get("l1_buffers", 2) not in (1, 2):
            raise KilnError("tiling", spec.name, f"{source}: l1_buffers={p['l1_buffers']} must be 1 or 2")
        bufs = _conv_buffers(spec, p["base_m"], p["base_n"], p["base_k1"], p["c1_step"], p.get("l1_buffers", 2))
        if "UB" in base.buffers:
            bufs["UB"] = on_chip_ub(p["base_m"]) if p.get("on_chip") else base.buffers["UB"]
        blocks = spec.n * ceil(spec.ho * spec.wo / p["base_m"]) * ceil(c1(spec.cout) * 16 / p["base_n"])
    over = _fits(profile, bufs)
    if over:
        raise KilnError("tiling", spec.name, f"{source}: tiling {params} needs {bufs[over]} B of {over}, "
                        f"{profile.name} has {profile.capacity[over]} B")
    return Variant(family, p, blocks, bufs, notes={"algorithm": algorithm_of(Variant(family, p))})


def choose_variant(spec: Opspec, profile: Profile, log: OptLog, options=None, pinned: str = "",
                   pinned_tiling: dict | None = None, records: dict | None = None) -> Variant:
    from ..emit.opspec_file import spec_hash
    rule, _ = _RULES[spec.kind]
    search = options is not None and options.kiln_opt_level != "O0"  # O0: the plain rule tiling
    record = None if (pinned or pinned_tiling) else (records or {}).get(spec_hash(spec))
    if record is not None and record.get("family") == "conv2d_winograd" and options is not None:
        # explicit options outrank a record: no Winograd when it is off, only the forced tile when forced
        mode = "OFF" if options.force_direct_conv else options.use_winograd
        tile = record.get("params", {}).get("tile")
        if mode == "OFF" or (mode in ("F2", "F4") and mode != f"F{tile}"):
            log.add("search", spec.name, "tuning_record:skipped", "option", record_family="conv2d_winograd",
                    USE_WINOGRAD=options.use_winograd, FORCE_DIRECT_CONV=options.force_direct_conv)
            record = None
    if pinned_tiling:
        family = ("gemm_cube" if spec.kind == "gemm" else "conv2d_winograd" if pinned.startswith("winograd")
                  else "conv2d_cube_img2col")
        params = dict(pinned_tiling, **({"tile": int(pinned[-1])} if family == "conv2d_winograd" else {}))
        v = variant_from_params(spec, profile, family, params, "kernel-list tiling")
        log.add("search", spec.name, v.tag, "option", pinned="tiling")
    elif record is not None:
        v = variant_from_params(spec, profile, record["family"], record["params"],
                                f"tuning record {record['opspec']}")
        log.add("search", spec.name, v.tag, "tuning_record", simulated_cycles=record["simulated_cycles"],
                records=options.kiln_tuning_records)
    elif spec.kind == "conv2d":
        v = choose_conv_algorithm(spec, profile, log, options, pinned, search)
    elif spec.kind == "gemm":
        log.add("tiling", spec.name, "gemm_cube", "family_rule", unit="cube")
        v = _gemm_variant(spec, profile, log, search)
    else:
        family = family_of(spec)
        log.add("tiling", spec.name, family, "family_rule", unit=UNIT_OF_FAMILY[family])
        v = rule(spec, profile, log)
    for key in ("base_m", "base_n"):
        if key in v.params and v.params[key] % 16:
            raise KilnError("tiling", spec.name, f"{key}={v.params[key]} is not a multiple of 16 (rule bug)")
    over = _fits(profile, v.buffers)
    if over:  # a rule bug, not a user error: say so loudly
        raise KilnError("tiling", spec.name, f"variant {v.params} overflows {over} "
                        f"({v.buffers[over]} B > {profile.capacity[over]} B on {profile.name})")
    log.add("tiling", spec.name, v.tag, "tile_fit", blocks=v.blocks, cores=profile.cores_for(v.unit),
            **{f"{k}_bytes": b for k, b in v.buffers.items() if b})
    return v


# Largest expected max|err| / max|ref| of a Winograd kernel (winograd.expected_error, measured in
# docs/winograd-numerics.md) the build accepts: 2% keeps F(4,3) (about 1e-2) and F(2,3) (about 1e-3). Whole-model
# validation (cosine >= 0.999) allows about 4.5e-2 RMS, and F(4,3) adds about 3e-3 RMS per layer.
WINOGRAD_MAX_ERROR = 0.02


def algorithm_of(v: Variant) -> str:
    """The algorithm a variant implements, as reported in the manifest and `kiln kernels --json`."""
    if v.family == "conv2d_winograd":
        return f"winograd_f{v.params['tile']}"
    if v.family == "conv2d_cube_img2col":
        return "direct_img2col"
    if v.family == "conv2d_vector":
        return "vector_direct"
    return v.family


def choose_conv_algorithm(spec: Conv2dSpec, profile: Profile, log: OptLog, options=None, pinned: str = "",
                          search: bool = False) -> Variant:
    """The Cube's algorithm (_cube_conv_algorithm), then the Vector unit's (conv2d_vector) if the cost model
    predicts fewer cycles for it. FORCE_DIRECT_CONV=ON, a forced Winograd tile (USE_WINOGRAD=ON/F2/F4), O0 and a
    pinned Cube algorithm keep the conv on the Cube; a pinned vector_direct skips the comparison."""
    from ..cost import model as costmodel
    illegal = vector_conv_legal(spec)
    if pinned == "vector_direct" and spec.dtype != "fp16":
        # like a Winograd pin in a bf16 build: reported, and the kernel is the Cube's direct one
        log.add("algorithm", spec.name, "vector_direct:rejected", "vector_unsupported", pinned=pinned,
                detail=illegal)
        pinned = "direct_img2col"
    if pinned == "vector_direct":
        v = None if illegal else _vector_conv_variant(spec, profile)
        if v is None:
            raise KilnError("tiling", spec.name, f"algorithm vector_direct was pinned but "
                            f"{illegal or 'one output row of every input channel does not fit UB'}")
        log.add("algorithm", spec.name, "vector_direct", "option", pinned=pinned)
        return replace(v, notes={"algorithm": "vector_direct"})
    cube = _cube_conv_algorithm(spec, profile, log, options, pinned, search)
    if (pinned or options is None or options.force_direct_conv or options.kiln_opt_level == "O0"
            or options.use_winograd not in ("AUTO", "OFF")):
        return cube
    name = cube.notes["algorithm"]
    cube_cycles = cube.notes.get("compared_cycles", {}).get(name)
    if cube_cycles is None:
        cube_cycles = round(costmodel.predict(spec, cube.family, cube.params, profile).cycles)
    vec = None if illegal else _vector_conv_variant(spec, profile)
    if vec is None:
        log.add("algorithm", spec.name, "vector_direct:rejected", "vector_unsupported" if illegal else "capacity",
                detail=illegal or "one output row of every input channel does not fit UB", limit="UB")
        return cube
    bound = costmodel.vector_conv_lower_bound(spec, vec.params, profile)
    if bound >= cube_cycles:  # the Vector unit's multiply-adds alone outlast the Cube kernel
        log.add("algorithm", spec.name, "vector_direct:rejected", "vector_slower", vector_cycles_at_least=round(bound),
                best=name, best_cycles=cube_cycles, cin=spec.cin, cout=spec.cout, ho=spec.ho, wo=spec.wo)
        return cube
    vec_cycles = round(costmodel.predict(spec, vec.family, vec.params, profile).cycles)
    if vec_cycles >= cube_cycles:
        log.add("algorithm", spec.name, "vector_direct:rejected", "vector_slower", vector_cycles=vec_cycles,
                best=name, best_cycles=cube_cycles, cin=spec.cin, cout=spec.cout, ho=spec.ho, wo=spec.wo)
        return cube
    log.add("algorithm", spec.name, "vector_direct", "cost_model", vector_direct_cycles=vec_cycles,
            **{f"{name}_cycles": cube_cycles}, cin=spec.cin, cout=spec.cout, ho=spec.ho, wo=spec.wo)
    compared = dict(cube.notes.get("compared_cycles", {name: cube_cycles}), vector_direct=vec_cycles)
    return replace(vec, notes={"algorithm": "vector_direct", "compared_cycles": compared})


def _cube_conv_algorithm(spec: Conv2dSpec, profile: Profile, log: OptLog, options=None, pinned: str = "",
                         search: bool = False) -> Variant:
    """Direct img2col or Winograd F(2,3)/F(4,3): USE_WINOGRAD=ON forces the fastest legal Winograd tile (F2/F4:
    that tile, even past the error tolerance), OFF (or FORCE_DIRECT_CONV=ON) never uses it, AUTO keeps the variant
    with the fewest predicted cycles."""
    from ..cost import model as costmodel
    from ..ir import winograd
    mode = "AUTO" if options is None else ("OFF" if options.force_direct_conv else options.use_winograd)
    if pinned:  # a kernel-list entry fixed the algorithm
        mode = {"direct_img2col": "OFF", "winograd_f2": "F2", "winograd_f4": "F4"}[pinned]
        if pinned != "direct_img2col" and winograd_legal(spec):
            raise KilnError("tiling", spec.name, f"algorithm {pinned} was pinned but {winograd_legal(spec)}")
    direct = _conv_variant(spec, profile, log, search)
    illegal = winograd_legal(spec)
    if spec.dtype != "fp16" and not illegal and mode != "OFF":
        # Also over a kernel-list pin (the default list pins Winograd entries for bench_winograd.py): the pin
        # is reported, and the kernel is the direct one. The expected errors scale with the operand type's unit
        # roundoff: bf16's 2^-8 is 8x fp16's 2^-11.
        bound = {f"error_bound_f{t}": winograd.expected_error(t) * 8 for t in WINOGRAD_TILES}
        log.add("algorithm", spec.name, "direct_img2col", "winograd_dtype", dtype=spec.dtype, USE_WINOGRAD=mode,
                tolerance=WINOGRAD_MAX_ERROR, **({"pinned": pinned} if pinned else {}), **bound)
        return replace(direct, notes={"algorithm": "direct_img2col"})
    if mode == "OFF" or illegal:
        why = dict(detail=illegal) if illegal else dict(pinned=pinned) if pinned else dict(
            USE_WINOGRAD=options.use_winograd, FORCE_DIRECT_CONV=options.force_direct_conv)
        log.add("algorithm", spec.name, "direct_img2col", "winograd_illegal" if illegal else "option", **why)
        return replace(direct, notes={"algorithm": "direct_img2col"})
    cycles = {"direct_img2col": costmodel.predict(spec, direct.family, direct.params, profile).cycles}
    cands: dict[str, Variant] = {}
    forced_tile = int(mode[1:]) if mode in ("F2", "F4") else None
    for tile in WINOGRAD_TILES:
        name = f"winograd_f{tile}"
        if forced_tile and tile != forced_tile:
            continue
        err = winograd.expected_error(tile)
        if err > WINOGRAD_MAX_ERROR and forced_tile:
            log.add("algorithm", spec.name, f"{name}:kept", "option", USE_WINOGRAD=mode, error_bound=err,
                    tolerance=WINOGRAD_MAX_ERROR)
        elif err > WINOGRAD_MAX_ERROR:
            log.add("algorithm", spec.name, f"{name}:rejected", "winograd_error_bound", error_bound=err,
                    tolerance=WINOGRAD_MAX_ERROR)
            continue
        v = _winograd_variant(spec, profile, tile, log, search)
        if v is None:
            log.add("algorithm", spec.name, f"{name}:rejected", "tile_shrunk", limit="UB")
            continue
        cands[name] = v
        cycles[name] = costmodel.predict(spec, v.family, v.params, profile).cycles
    forced = mode != "AUTO"
    pool = dict(cands) if forced and cands else {"direct_img2col": direct, **cands}
    best = min(pool, key=lambda a: (cycles[a], a))
    facts = {f"{a}_cycles": round(c) for a, c in cycles.items()}
    facts.update({f"waste_f{t}": round(winograd_tile_waste(spec, t), 4) for t in WINOGRAD_TILES})
    reason = "option" if forced else "cost_model"
    how = {"pinned": pinned} if pinned else {"USE_WINOGRAD": mode} if forced else {}
    log.add("algorithm", spec.name, best, reason, **how, **facts)
    for a in cands:
        if a != best and mode == "AUTO" and cycles[a] > cycles[best]:
            log.add("algorithm", spec.name, f"{a}:rejected", _winograd_loss_reason(spec, cands[a]),
                    cycles=round(cycles[a]), best=best, best_cycles=round(cycles[best]),
                    waste=round(winograd_tile_waste(spec, cands[a].params["tile"]), 4),
                    tiles=winograd_geometry(spec, cands[a].params["tile"]).p, cin=spec.cin, cout=spec.cout)
    chosen = direct if best == "direct_img2col" else cands[best]
    return replace(chosen, notes={"algorithm": best, "compared_cycles": {a: round(c) for a, c in cycles.items()}})


def _winograd_loss_reason(spec: Conv2dSpec, v: Variant) -> str:
    """Names what most plausibly made a Winograd variant lose on cycles (the choice itself is the cost model's)."""
    tile = v.params["tile"]
    if winograd_tile_waste(spec, tile) >= 0.15:
        return "winograd_tile_waste"
    if min(spec.cin, spec.cout) < 16 or spec.cin % 16 or spec.cout % 16:
        return "winograd_channels"
    if winograd_geometry(spec, tile).p < 64:
        return "winograd_small_map"
    return "winograd_slower"


def mte2_bytes(spec: Opspec, variant: Variant) -> int:
    """GM -> L1/UB bytes the variant's kernel moves (what the MTE2 counter must show)."""
    if variant.family == "conv2d_winograd":
        return _winograd_mte2(spec, variant)
    if variant.family == "conv2d_vector":
        return _vector_conv_mte2(spec, variant)
    return _RULES[spec.kind][1](spec, variant)


def _winograd_mte2(spec: Conv2dSpec, v: Variant) -> int:
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


def kernel_inputs(spec: Opspec, variant: Variant) -> list:
    """The kernel's packed inputs: the spec's, except where the variant changes a layout (Winograd weights)."""
    ins = spec.inputs()
    if variant.family == "conv2d_winograd":
        from ..ir.opspec import Tensor
        ins[1] = Tensor("u", winograd_weight_shape(spec, variant.params["tile"]), "fp16", "WINOGRAD_FRACTAL_Z")
    return ins
