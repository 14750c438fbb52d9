"""gelu_vector: GELU (erf form) streamed through UB, fp32 inside (templates/gelu_vector.cpp.j2)."""
from __future__ import annotations

from ..cost.blocks import stream
from ..cost.model import Prediction
from ..ir.opspec import EltwiseSpec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .base import Family, Variant, register, share128
from .eltwise_vector import STREAM, choose_blocks_eltwise, eltwise_mte2, stream_space

PER_ELEM = 8 + 16  # fp16 x and z ping-pong (2 x 2 x 2 B) + four fp32 temporaries (16 B) per element


def gelu_rule(spec: EltwiseSpec, profile: Profile, log: OptLog) -> Variant:
    cores = profile.cores_for("vector")
    tile = share128(spec.numel, cores, (profile.capacity["UB"] // PER_ELEM) // 128 * 128)
    return Variant("gelu_vector", {"tile_elems": tile}, choose_blocks_eltwise(spec.numel, tile, profile),
                   {"UB": PER_ELEM * tile})


# GELU as erf by Abramowitz-Stegun 7.1.26, one fp32 instruction chain per repeat (templates/gelu_vector.cpp.j2).
GELU_OPS = [("Cast", True), ("Abs", True), ("Muls", True), ("Muls", True), ("Adds", True), ("Reciprocal", True),
             ("Muls", True)] + [("Adds", True), ("Mul", True)] * 4 + [
             ("Mul", True), ("Muls", True), ("Exp", True), ("Mul", True), ("Muls", True), ("Adds", True),
             ("Abs", True), ("Mul", True), ("Add", True), ("Muls", True), ("Cast", True)]


def replay_gelu(spec, params: dict, profile: Profile) -> Prediction:
    tile = params["tile_elems"]
    return stream(profile, spec.numel, tile, choose_blocks_eltwise(spec.numel, tile, profile), 1, GELU_OPS, 64)


FAMILY = register(Family("gelu_vector", "eltwise", "vector", gelu_rule, eltwise_mte2, replay_gelu,
                matches=lambda spec: spec.op == "gelu",
                space=lambda spec, params, profile: stream_space(spec, profile, PER_ELEM),
                generic=STREAM))
