"""eltwise_vector: elementwise ops (add, mul, relu, ...) streamed through UB in tiles, one per Vector core
(templates/eltwise_vector.cpp.j2)."""
from __future__ import annotations

from math import ceil

from ..cost.blocks import stream
from ..cost.model import Prediction
from ..ir.opspec import EltwiseSpec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, GenericForm, Variant, powers, register, share128, splits


def eltwise_rule(spec: EltwiseSpec, profile: Profile, log: OptLog) -> Variant:
    cores = profile.cores_for("vector")
    tensors = 3 if spec.op in ("add", "mul") else 2  # ping-pong buffers of x (and y) and z
    max_tile = (profile.capacity["UB"] // (2 * tensors * 2)) // 128 * 128
    tile = share128(spec.numel, cores, max_tile)
    return Variant("eltwise_vector", {"tile_elems": tile}, choose_blocks_eltwise(spec.numel, tile, profile),
                   {"UB": 2 * tensors * tile * 2})


def choose_blocks_eltwise(numel: int, tile: int, profile: Profile) -> int:
    """Vector blocks of a streaming kernel: one per tile, at most one per Vector core."""
    return min(profile.cores_for("vector"), ceil(numel / tile))


def eltwise_mte2(spec: EltwiseSpec, v: Variant) -> int:
    return spec.numel * 2 * (2 if spec.op in ("add", "mul") else 1)


def replay_eltwise(spec, params: dict, profile: Profile) -> Prediction:
    binary = spec.op in ("add", "mul")
    ops = []
    if binary:
        ops.append(("Mul" if spec.op == "mul" else "Add", False))
    if spec.op in ("muls", "adds"):
        ops.append(("Muls" if spec.op == "muls" else "Adds", False))
    if "relu" in (spec.act, spec.op):
        ops.append(("Relu", False))
    if "clip" in (spec.act, spec.op):
        ops += [("Maxs", False), ("Mins", False)]
    tile = params["tile_elems"]
    return stream(profile, spec.numel, tile, choose_blocks_eltwise(spec.numel, tile, profile), 2 if binary else 1,
                   ops)


def stream_space(spec, profile: Profile, per_elem: int) -> list[dict]:
    """Tiles of a streaming kernel with `per_elem` UB bytes per element: every per-core share and power of two."""
    max_tile = (profile.capacity["UB"] // per_elem) // 128 * 128
    share = ceil(spec.numel / 128)
    tiles = {128 * t for t in splits(share) if 128 * t <= max_tile} | {128 * p for p in powers(max_tile // 128)}
    return [{"tile_elems": t} for t in sorted(tiles)]


def space(spec, params: dict, profile: Profile) -> list[dict]:
    return stream_space(spec, profile, 2 * (3 if spec.op in ("add", "mul") else 2) * 2)


STREAM = GenericForm(("numel",), ("numel",), ("tile_elems",), runtime_blocks=True)
FAMILY = register(Family("eltwise_vector", "eltwise", "vector", eltwise_rule, eltwise_mte2, replay_eltwise,
                matches=lambda spec: spec.op != "gelu", space=space, generic=STREAM))
