"""lstm_loop_mixed: an ONNX LSTM's recurrence looped over time inside one launch, one block per direction on a Cube core
and one of its Vector cores (templates/lstm_loop_mixed.cpp.j2): per step the hidden projection h R^T on the Cube (R^T
resident in L1, and in L0B when it fits), the gates and the state update on the Vector unit with c kept in UB
(fp32) across the steps; the two hand over through a GM workspace and cross-core flags, as attention_flash does.
The input projection of the whole sequence is the GEMM before it (codegen/frontend/onnx_rnn.py)."""
from __future__ import annotations

from collections.abc import Callable
from math import ceil
from typing import Any

from .. import KilnError
from ..cost.model import OUT, WORKSPACE, CrossFlagSim, Prediction, SimCore, launch_group
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..ir.recurrent_spec import GruLoopSpec, LstmLoopSpec
from .base import Family, Variant, fits, register

SIGMOID = [("Muls", True), ("Exp", True), ("Adds", True), ("Reciprocal", True)]
TANH = [("Muls", True), ("Exp", True), ("Adds", True), ("Reciprocal", True), ("Muls", True), ("Adds", True)]


def loop_buffers(spec: LstmLoopSpec, base_n: int) -> dict[str, int]:
    """Bytes per buffer: R^T and the h tile in L1, h in L0A, R^T (or a chunk of base_n columns) in L0B, the step's
    hidden projection in L0C; in UB the step's xw rows (fp16), the gates and the projection (fp32), c, a
    scratch and h (fp32), h and c (fp16)."""
    h, g, m16, bh = spec.hidden, 4 * spec.hidden, ceil(spec.batch / 16) * 16, spec.batch * spec.hidden
    return {"L1": (h * g + m16 * h) * 2, "L0A": m16 * h * 2, "L0B": h * base_n * 2, "L0C": m16 * g * 4,
            "UB": 4 * bh * 2 + 2 * 4 * bh * 4 + 3 * bh * 4 + 2 * bh * 2}


def loop_rule(spec: LstmLoopSpec | GruLoopSpec, profile: Profile, log: OptLog, family: str,
              buffers: Callable[[Any, int], dict[str, int]]) -> Variant:
    """A looped recurrence's tiling (this family's and gru_loop_mixed's): R^T whole in L0B when it fits (loaded
    once), else the widest chunk of 16-column blocks that does."""
    g = spec.gates * spec.hidden
    base_n = g
    while base_n > 16 and fits(profile, {"L0B": buffers(spec, base_n)["L0B"]}):
        base_n = max(16, ceil(base_n / 2 / 16) * 16)
    bufs = buffers(spec, base_n)
    over = fits(profile, bufs)
    if over:
        raise KilnError("tiling", spec.name, f"the loop's tiles need {bufs[over]} B of {over}, {profile.name} has "
                        f"{profile.capacity[over]} B (the frontend unrolls a recurrence this large)")
    log.add("tiling", spec.name, f"base_n={base_n}", "tile_fit" if base_n == g else "tile_shrunk",
            detail="R^T resident in L0B" if base_n == g else f"R^T streamed L1 -> L0B in chunks of {base_n}",
            limit="" if base_n == g else "L0B")
    return Variant(family, {"base_n": base_n}, spec.dirs, bufs)


def lstm_loop_rule(spec: LstmLoopSpec, profile: Profile, log: OptLog) -> Variant:
    return loop_rule(spec, profile, log, "lstm_loop_mixed", loop_buffers)


def lstm_loop_mte2(spec: LstmLoopSpec, v: Variant) -> int:
    """GM reads: R^T once per direction, the initial states, per step the xw rows, h (but the first step's without
    h0) and the workspace's fp32 projection."""
    h, g, bh = spec.hidden, 4 * spec.hidden, spec.batch * spec.hidden
    cube_steps = spec.seq - (0 if spec.h0 else 1)
    per_dir = h * g * 2 + spec.seq * 4 * bh * 2 + cube_steps * (bh * 2 + 4 * bh * 4) + (bh * 2 if spec.c0 else 0)
    return spec.dirs * per_dir


class CubeLoop:
    """The Cube side of a looped recurrence's replay (this template's and gru_loop_mixed's): R^T read once into L1
    (and L0B when resident); a Cube step multiplies one [B, H] operand by seg_n1 column fractals of R^T (resident,
    or streamed in chunks of base_n columns) and Fixpipes one [B, H] fp32 block per gate to the workspace."""

    def __init__(self, spec: LstmLoopSpec | GruLoopSpec, params: dict) -> None:
        self.s = spec
        self.h1, self.m1 = spec.hidden // 16, ceil(spec.batch / 16)
        self.g1 = spec.gates * self.h1
        self.nb1 = params["base_n"] // 16
        self.resident = params["base_n"] == spec.gates * spec.hidden
        self.bh = spec.batch * spec.hidden

    def cube_step(self, c: SimCore, ready: CrossFlagSim | None, done: CrossFlagSim, src: int, seg_n1: int) -> None:
        s = self.s
        if ready is not None:
            ready.wait(c, "MTE2")
        c.wait_flag("MTE1", "MTE2", 0)
        c.copy_gm(s.batch, s.hidden, 2, "L1", src=src)
        c.set_flag("MTE2", "MTE1", 0)
        c.wait_flag("MTE2", "MTE1", 0)
        c.wait_flag("M", "MTE1", 0)
        for _ in range(self.m1):
            c.load2d(self.h1, "L0A")
        c.set_flag("MTE1", "MTE2", 0)
        c.wait_flag("FIX", "M", 0)
        for n1_0 in range(0, seg_n1, seg_n1 if self.resident else self.nb1):
            n1 = seg_n1 if self.resident else min(self.nb1, seg_n1 - n1_0)
            if not self.resident:
                if n1_0 > 0:
                    c.set_flag("M", "MTE1", 1)
                    c.wait_flag("M", "MTE1", 1)
                for _ in range(self.h1):
                    c.load2d(n1, "L0B")
            c.set_flag("MTE1", "M", 0)
            c.wait_flag("MTE1", "M", 0)
            c.mmad(s.batch, n1 * 16, s.hidden)
        c.set_flag("M", "MTE1", 0)
        c.set_flag("M", "FIX", 0)
        c.wait_flag("M", "FIX", 0)
        for _ in range(seg_n1 // self.h1):
            c.fixpipe(self.bh, 4)
        c.set_flag("FIX", "M", 0)
        done.set(c, "FIX")

    def cube_begin(self, c: SimCore) -> None:
        c.set_flag("MTE1", "MTE2", 0)
        c.set_flag("M", "MTE1", 0)
        c.set_flag("FIX", "M", 0)
        c.copy_gm(1, self.h1 * self.g1 * 256, 2, "L1", src=1)
        c.set_flag("MTE2", "MTE1", 1)
        c.wait_flag("MTE2", "MTE1", 1)
        if self.resident:
            c.load2d(self.h1 * self.g1, "L0B")

    def store_h(self, v: SimCore, ops: list[tuple[str, bool]], h_ready: CrossFlagSim, last: bool) -> None:
        """The Vector core's end of a step: `ops` produce h in fp16 (h16 free first), h -> Y's row block; the next
        step's Cube operand (h_ready)."""
        v.wait_flag("MTE3", "V", 1)
        v.vec_flat(self.bh, 64, ops)
        v.set_flag("V", "MTE3", 1)
        v.wait_flag("V", "MTE3", 1)
        v.copy_ub_to_gm(1, self.bh, 2)
        v.set_flag("MTE3", "V", 1)
        if not last:
            h_ready.set(v, "MTE3")

    @staticmethod
    def cube_end(c: SimCore) -> None:
        c.wait_flag("MTE1", "MTE2", 0)
        c.wait_flag("M", "MTE1", 0)
        c.wait_flag("FIX", "M", 0)


class _LoopReplay(CubeLoop):
    """templates/lstm_loop_mixed.cpp.j2's instruction streams, per direction (block)."""
    s: LstmLoopSpec

    def vector_step(self, v: SimCore, h_ready: CrossFlagSim, g_ready: CrossFlagSim, cube: bool, last: bool) -> None:
        s, bh = self.s, self.bh
        v.wait_flag("V", "MTE2", 0)
        for _ in range(4):
            v.copy_gm(s.batch, s.hidden, 2, "UB", src=0)
        if cube:
            g_ready.wait(v, "MTE2")
            v.copy_gm(1, 4 * bh, 4, "UB", src=WORKSPACE)
        v.set_flag("MTE2", "V", 0)
        v.wait_flag("MTE2", "V", 0)
        v.vec_flat(4 * bh, 64, [("Cast", True)])
        if cube:
            v.vec_flat(4 * bh, 64, [("Add", True)])
        v.set_flag("V", "MTE2", 0)
        v.vec_flat(3 * bh, 64, SIGMOID)
        v.vec_flat(bh, 64, TANH)
        v.vec_flat(bh, 64, [("Mul", True), ("Mul", True), ("Add", True)])
        v.vec_flat(bh, 64, TANH)
        self.store_h(v, [("Mul", True), ("Cast", True)], h_ready, last)

    def vector_begin(self, v: SimCore) -> None:
        if self.s.c0:
            v.copy_gm(1, self.bh, 2, "UB", src=3 if self.s.h0 else 2)
            v.set_flag("MTE2", "V", 1)
            v.wait_flag("MTE2", "V", 1)
            v.vec_flat(self.bh, 64, [("Cast", True)])
        else:
            v.vec_flat(self.bh, 64, [("Dup", True)])
        v.set_flag("V", "MTE2", 0)
        v.set_flag("MTE3", "V", 1)

    def vector_end(self, v: SimCore) -> None:
        v.wait_flag("MTE3", "V", 1)
        v.copy_ub_to_gm(1, self.bh, 2)
        v.vec_flat(self.bh, 64, [("Cast", True)])
        v.set_flag("V", "MTE3", 2)
        v.wait_flag("V", "MTE3", 2)
        v.copy_ub_to_gm(1, self.bh, 2)
        v.wait_flag("V", "MTE2", 0)

    def block(self, c: SimCore, v: SimCore, _v1: SimCore, d: int) -> None:
        same = c is v
        if c.blocks > 0:
            c.barrier_all()
            if not same:
                v.barrier_all()
        h_ready, g_ready = CrossFlagSim(same, c.p), CrossFlagSim(same, c.p)
        self.cube_begin(c)
        self.vector_begin(v)
        for step in range(self.s.seq):
            cube = step > 0 or self.s.h0
            if cube:
                self.cube_step(c, h_ready if step else None, g_ready, OUT if step else 2, self.g1)
            self.vector_step(v, h_ready, g_ready, cube, step == self.s.seq - 1)
        self.vector_end(v)
        self.cube_end(c)


def replay_lstm_loop(spec: LstmLoopSpec, params: dict, profile: Profile) -> Prediction:
    """templates/lstm_loop_mixed.cpp.j2, instruction for instruction."""
    return launch_group(profile, spec.dirs, _LoopReplay(spec, params).block)


FAMILY = register(Family("lstm_loop_mixed", "lstm_loop", "cube", lstm_loop_rule, lstm_loop_mte2,
                         replay_lstm_loop))
