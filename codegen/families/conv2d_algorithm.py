"""The choice among the convolution families: direct img2col or Winograd on the Cube (conv2d_cube_img2col,
conv2d_winograd), then the Vector unit's direct conv (conv2d_vector) where the cost model predicts it faster. The
build options, a kernel-list pin and the Winograd error tolerance constrain it; every outcome is logged.
"""
from __future__ import annotations

from dataclasses import replace

from .. import KilnError
from ..ir.opspec import Conv2dSpec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Variant, predicted_cycles
from .conv2d_cube_img2col import conv_rule
from .conv2d_grouped_cube import choose_grouped
from .conv2d_vector import vector_conv_legal, vector_conv_lower_bound, vector_conv_rule
from .conv2d_winograd import WINOGRAD_TILES, winograd_geometry, winograd_legal, winograd_rule, winograd_tile_waste

# Largest expected max|err| / max|ref| of a Winograd kernel (winograd.expected_error, measured in
# docs/winograd-numerics.md) the build accepts: 2% keeps F(4,3) (about 1e-2) and F(2,3) (about 1e-3). Whole-model
# validation (cosine >= 0.999) allows about 4.5e-2 RMS, and F(4,3) adds about 3e-3 RMS per layer.
WINOGRAD_MAX_ERROR = 0.02


def choose_conv_algorithm(spec: Conv2dSpec, profile: Profile, log: OptLog, options=None, pinned: str = "",
                          search: bool = False) -> Variant:
    """The Cube's algorithm (cube_conv_algorithm), then the Vector unit's (conv2d_vector) if the cost model
    predicts fewer cycles for it. FORCE_DIRECT_CONV=ON, a forced Winograd tile (USE_WINOGRAD=ON/F2/F4), O0 and a
    pinned Cube algorithm keep the conv on the Cube; a pinned vector_direct skips the comparison."""
    if spec.group > 1:  # grouped: the Cube's block-diagonal img2col kernel (Winograd and Vector: dense only)
        return choose_grouped(spec, profile, log, search)
    illegal = vector_conv_legal(spec)
    if pinned == "vector_direct" and spec.dtype != "fp16":
        # like a Winograd pin in a bf16 build: reported, and the kernel is the Cube's direct one
        log.add("algorithm", spec.name, "vector_direct:rejected", "vector_unsupported", pinned=pinned,
                detail=illegal)
        pinned = "direct_img2col"
    if pinned == "vector_direct":
        v = None if illegal else vector_conv_rule(spec, profile)
        if v is None:
            raise KilnError("tiling", spec.name, f"algorithm vector_direct was pinned but "
                            f"{illegal or 'one output row of every input channel does not fit UB'}")
        log.add("algorithm", spec.name, "vector_direct", "option", pinned=pinned)
        return replace(v, notes={"algorithm": "vector_direct"})
    cube = cube_conv_algorithm(spec, profile, log, options, pinned, search)
    if (pinned or options is None or options.force_direct_conv or options.kiln_opt_level == "O0"
            or options.use_winograd not in ("AUTO", "OFF")):
        return cube
    name = cube.notes["algorithm"]
    cube_cycles = cube.notes.get("compared_cycles", {}).get(name)
    if cube_cycles is None:
        cube_cycles = round(predicted_cycles(spec, cube.family, cube.params, profile))
    vec = None if illegal else vector_conv_rule(spec, profile)
    if vec is None:
        log.add("algorithm", spec.name, "vector_direct:rejected", "vector_unsupported" if illegal else "capacity",
                detail=illegal or "one output row of every input channel does not fit UB", limit="UB")
        return cube
    bound = vector_conv_lower_bound(spec, vec.params, profile)
    if bound >= cube_cycles:  # the Vector unit's multiply-adds alone outlast the Cube kernel
        log.add("algorithm", spec.name, "vector_direct:rejected", "vector_slower", vector_cycles_at_least=round(bound),
                best=name, best_cycles=cube_cycles, cin=spec.cin, cout=spec.cout, ho=spec.ho, wo=spec.wo)
        return cube
    vec_cycles = round(predicted_cycles(spec, vec.family, vec.params, profile))
    if vec_cycles >= cube_cycles:
        log.add("algorithm", spec.name, "vector_direct:rejected", "vector_slower", vector_cycles=vec_cycles,
                best=name, best_cycles=cube_cycles, cin=spec.cin, cout=spec.cout, ho=spec.ho, wo=spec.wo)
        return cube
    log.add("algorithm", spec.name, "vector_direct", "cost_model", vector_direct_cycles=vec_cycles,
            **{f"{name}_cycles": cube_cycles}, cin=spec.cin, cout=spec.cout, ho=spec.ho, wo=spec.wo)
    compared = dict(cube.notes.get("compared_cycles", {name: cube_cycles}), vector_direct=vec_cycles)
    return replace(vec, notes={"algorithm": "vector_direct", "compared_cycles": compared})


def cube_conv_algorithm(spec: Conv2dSpec, profile: Profile, log: OptLog, options=None, pinned: str = "",
                         search: bool = False) -> Variant:
    """Direct img2col or Winograd F(2,3)/F(4,3): USE_WINOGRAD=ON forces the fastest legal Winograd tile (F2/F4:
    that tile, even past the error tolerance), OFF (or FORCE_DIRECT_CONV=ON) never uses it, AUTO keeps the variant
    with the fewest predicted cycles."""
    from ..ir import winograd
    mode = "AUTO" if options is None else ("OFF" if options.force_direct_conv else options.use_winograd)
    if pinned:  # a kernel-list entry fixed the algorithm
        mode = {"direct_img2col": "OFF", "winograd_f2": "F2", "winograd_f4": "F4"}[pinned]
        if pinned != "direct_img2col" and winograd_legal(spec):
            raise KilnError("tiling", spec.name, f"algorithm {pinned} was pinned but {winograd_legal(spec)}")
    direct = conv_rule(spec, profile, log, search)
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
    cycles = {"direct_img2col": predicted_cycles(spec, direct.family, direct.params, profile)}
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
        v = winograd_rule(spec, profile, tile, log, search)
        if v is None:
            log.add("algorithm", spec.name, f"{name}:rejected", "tile_shrunk", limit="UB")
            continue
        cands[name] = v
        cycles[name] = predicted_cycles(spec, v.family, v.params, profile)
    forced = mode != "AUTO"
    pool = dict(cands) if forced and cands else {"direct_img2col": direct, **cands}
    best = min(pool, key=lambda a: (cycles[a], a))
    facts: dict[str, float] = {f"{a}_cycles": round(c) for a, c in cycles.items()}
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


def pinned_family(spec: Conv2dSpec, pinned: str) -> tuple[str, dict]:
    """The family a kernel-list tiling pin of algorithm `pinned` sets, and the parameters the pin implies."""
    if pinned.startswith("winograd"):
        return "conv2d_winograd", {"tile": int(pinned[-1])}
    return "conv2d_cube_img2col", {}
