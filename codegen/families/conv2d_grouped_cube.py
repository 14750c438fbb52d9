"""conv2d_grouped_cube: grouped convolution (ONNX Conv with 1 < group, not depthwise: ResNeXt, RegNet, ShuffleNet
v1, AlexNet) on the Cube, as conv2d_cube_img2col's kernel with a block-diagonal weight
(templates/conv2d_grouped_cube.cpp.j2 includes its template; its replay and GM bytes, which take each N tile's
group range from the spec, are this family's too).

A block is one (image, M tile, N tile of output channel blocks) and its K loop runs over only the input channel
blocks of the groups the N tile holds (Conv2dSpec.group_c1_range). The group blocking, how many groups one Cube
GEMM block takes, is the N tile width: groups narrower than the 16-wide fractal share one (their block-diagonal
weight wastes MACs, the cost of filling the Cube; NC1HWC0 gives an output block no narrower layout), a wider N
tile takes more groups per block (fewer blocks and loads, more wasted MACs), a group wider than a fractal spans
several. Every width is replayed in the cost model and the fewest cycles win ([OPT] tiling ... group_blocking);
then the searched tiling (base_m, base_k1, c1_step, and base_n again) starts from that choice.
"""
from __future__ import annotations

from dataclasses import replace
from math import ceil

from ..cost.model import Prediction
from ..ir.opspec import C0, Conv2dSpec, c1
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, fits, predicted_cycles, r16, register
from .conv2d_cube_img2col import conv_buffers, conv_candidates, conv_mte2, conv_rule, replay_img2col
from .ranking import TILE_EDGES, pick_best

NAME = "conv2d_grouped_cube"


def tile_ranges(spec: Conv2dSpec, base_n: int) -> list[tuple[int, int, int, int]]:
    """Per N tile of `base_n` output channels: (first output block, blocks, first input block, input blocks)."""
    CO1, n1 = c1(spec.cout), base_n // C0
    out = []
    for n1_0 in range(0, CO1, n1):
        cnt = min(n1, CO1 - n1_0)
        lo, hi = spec.group_c1_range(n1_0, cnt)
        out.append((n1_0, cnt, lo, hi - lo))
    return out


def blocking_facts(spec: Conv2dSpec, base_n: int) -> dict:
    """What a group blocking does: groups per GEMM block, the K blocks a tile reduces over, the MACs spent on the
    block-diagonal zeros and the channel padding (share of all the Cube's MACs)."""
    per_out = spec.cout // spec.group
    tiles = tile_ranges(spec, base_n)
    m16 = r16(spec.ho * spec.wo)
    done = sum(m16 * cnt * C0 * k1 * C0 for _, cnt, _, k1 in tiles) * spec.kh * spec.kw
    useful = spec.ho * spec.wo * spec.cout * (spec.cin // spec.group) * spec.kh * spec.kw
    return {"groups_per_block": round(min(base_n, r16(spec.cout)) / per_out, 3), "n_tiles": len(tiles),
            "k_blocks": max(k1 for *_, k1 in tiles), "mac_waste": round(1 - useful / done, 4)}


def _blocking_params(spec: Conv2dSpec, rule: dict, base_n: int, profile: Profile) -> dict | None:
    """The rule tiling at N tile width `base_n`: its L1 step and K fractals capped by the tile's K blocks, the
    step halved while the buffers overflow (None: nothing fits)."""
    kmax = max(k1 for *_, k1 in tile_ranges(spec, base_n))
    p = dict(rule, base_n=base_n, c1_step=min(rule["c1_step"], kmax),
             base_k1=min(rule["base_k1"], kmax * spec.kh * spec.kw))
    while fits(profile, conv_buffers(spec, p["base_m"], base_n, p["base_k1"], p["c1_step"])):
        if p["c1_step"] == 1:
            return None
        p["c1_step"] = ceil(p["c1_step"] / 2)
    return p


def group_blocking(spec: Conv2dSpec, rule: dict, profile: Profile, log: OptLog) -> dict:
    """The N tile width (groups per Cube GEMM block) with the fewest replayed cycles, every width logged."""
    widths = [bn for bn in TILE_EDGES if bn <= r16(spec.cout) or bn == C0]
    scored = []
    for bn in widths:
        p = _blocking_params(spec, rule, bn, profile)
        if p is not None:
            scored.append((predicted_cycles(spec, NAME, p, profile), bn, p))
    cycles, bn, best = min(scored, key=lambda t: (t[0], t[1]))
    per_in, per_out = spec.cin // spec.group, spec.cout // spec.group
    log.add("tiling", spec.name, f"group_blocking:base_n={bn}", "cost_model", group=spec.group,
            cin_per_group=per_in, cout_per_group=per_out, cycles=round(cycles), **blocking_facts(spec, bn))
    for c, other, _ in scored:
        if other != bn:
            log.add("tiling", spec.name, f"group_blocking:base_n={other}:rejected", "cost_model", cycles=round(c),
                    best_cycles=round(cycles), **blocking_facts(spec, other))
    return best


def grouped_rule(spec: Conv2dSpec, profile: Profile, log: OptLog, search: bool = False) -> Variant:
    """The dense conv's rule geometry (M tile, K blocking, epilogue), then the group blocking by the cost model,
    then (search) the tiling search from there."""
    base = conv_rule(spec, profile, OptLog())
    best = group_blocking(spec, base.params, profile, log)
    if search:
        best = pick_best(spec, NAME, best, conv_candidates(spec, best, profile, conv_buffers), profile, log)
    bufs = conv_buffers(spec, best["base_m"], best["base_n"], best["base_k1"], best["c1_step"],
                        best.get("l1_buffers", 2))
    if "UB" in base.buffers:  # the epilogue's UB (Vector pass or on chip) as the dense rule sized it
        bufs["UB"] = base.buffers["UB"]
    blocks = spec.n * ceil(spec.ho * spec.wo / best["base_m"]) * ceil(c1(spec.cout) * C0 / best["base_n"])
    return Variant(NAME, best, blocks, bufs)


def choose_grouped(spec: Conv2dSpec, profile: Profile, log: OptLog, search: bool = False) -> Variant:
    """The conv chooser's grouped branch: Winograd and the Vector conv take dense convolutions only."""
    v = grouped_rule(spec, profile, log, search)
    log.add("algorithm", spec.name, "grouped_img2col", "grouped_conv", group=spec.group, cin=spec.cin, cout=spec.cout)
    return replace(v, notes={"algorithm": "grouped_img2col"})


def grouped_mte2(spec: Conv2dSpec, v: Variant) -> int:
    return conv_mte2(spec, v)


def replay_grouped(spec: Conv2dSpec, params: dict, profile: Profile) -> Prediction:
    """The img2col replay: its K loop takes each N tile's group range from the spec (group_c1_range)."""
    return replay_img2col(spec, params, profile)


FAMILY = register(Family(NAME, "conv2d", "cube", None, grouped_mte2, replay_grouped,
                         matches=lambda spec: spec.group > 1, algorithm=lambda v: "grouped_img2col"))
