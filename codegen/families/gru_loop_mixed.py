"""gru_loop_mixed: an ONNX GRU's recurrence looped over time inside one launch, one block per direction on a Cube core
and one of its Vector cores (templates/gru_loop_mixed.cpp.j2), as lstm_loop_mixed does for the LSTM: per step the
hidden projection on the Cube (R^T resident in L1, and in L0B when it fits), the gates and the state update on the
Vector unit with h kept in UB (fp32) across the steps. linear_before_reset=0 needs (r * h) R_h^T after the Vector
has computed r: a second Cube step per time step, the two cores handing r * h and its product over through GM
workspaces and cross-core flags. The input projection of the whole sequence is the GEMM before it
(codegen/frontend/onnx_rnn.py)."""
from __future__ import annotations

from math import ceil

from ..cost.model import OUT, WORKSPACE, CrossFlagSim, Prediction, SimCore, launch_group
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..ir.recurrent_spec import GruLoopSpec
from .base import Family, Variant, register
from .lstm_loop_mixed import SIGMOID, TANH, CubeLoop, loop_rule

CAST = [("Cast", True)]


def gru_buffers(spec: GruLoopSpec, base_n: int) -> dict[str, int]:
    """Bytes per buffer: R^T and the h tile in L1, h (or r * h) in L0A, R^T (or a chunk of base_n columns) in L0B,
    one Cube step's product in L0C (3H columns with linear_before_reset, else 2H); in UB the step's xw rows
    (fp16), the gates and the projection (fp32), h, a scratch and Rb_h or the second product (fp32), h and Rb_h
    or r * h (fp16)."""
    h, g, m16, bh = spec.hidden, 3 * spec.hidden, ceil(spec.batch / 16) * 16, spec.batch * spec.hidden
    proj = 3 if spec.lbr else 2
    return {"L1": (h * g + m16 * h) * 2, "L0A": m16 * h * 2, "L0B": h * base_n * 2, "L0C": m16 * proj * h * 4,
            "UB": 3 * bh * 2 + 3 * bh * 4 + proj * bh * 4 + 3 * bh * 4 + 2 * bh * 2}


def gru_loop_rule(spec: GruLoopSpec, profile: Profile, log: OptLog) -> Variant:
    return loop_rule(spec, profile, log, "gru_loop_mixed", gru_buffers)


def gru_loop_mte2(spec: GruLoopSpec, v: Variant) -> int:
    """GM reads: R^T once per direction, h0 and Rb_h, per step the xw rows; per step with h (all but the first
    without h0) h and the workspace's projection, and without linear_before_reset r * h and its product."""
    h, bh = spec.hidden, spec.batch * spec.hidden
    cube_steps = spec.seq - (0 if spec.h0 else 1)
    per_step = bh * 2 + (3 if spec.lbr else 2) * bh * 4 + (0 if spec.lbr else bh * 2 + bh * 4)
    per_dir = 3 * h * h * 2 + spec.seq * 3 * bh * 2 + cube_steps * per_step + bh * 2 * (spec.h0 + spec.lbr)
    return spec.dirs * per_dir


class _GruReplay(CubeLoop):
    """templates/gru_loop_mixed.cpp.j2's instruction streams, per direction (block); the Cube side is
    lstm_loop_mixed's (the same template code, one Cube step per segment of R^T)."""
    s: GruLoopSpec

    def __init__(self, spec: GruLoopSpec, params: dict) -> None:
        super().__init__(spec, params)
        self.h0_src = 3 if spec.lbr else 2

    def vector_gates(self, v: SimCore, flags: list[CrossFlagSim], cube: bool) -> None:
        s, bh = self.s, self.bh
        _, g_ready, rh_ready, _ = flags
        v.wait_flag("V", "MTE2", 0)
        for _ in range(3):
            v.copy_gm(s.batch, s.hidden, 2, "UB", src=0)
        if cube:
            g_ready.wait(v, "MTE2")
            v.copy_gm(1, (3 if s.lbr else 2) * bh, 4, "UB", src=WORKSPACE)
        v.set_flag("MTE2", "V", 0)
        v.wait_flag("MTE2", "V", 0)
        v.vec_flat(3 * bh, 64, CAST)
        if cube:
            v.vec_flat(2 * bh, 64, [("Add", True)])
        if cube and s.lbr:
            v.vec_flat(bh, 64, [("Add", True)])
        v.set_flag("V", "MTE2", 0)
        v.vec_flat(2 * bh, 64, SIGMOID)
        if s.lbr:
            v.vec_flat(bh, 64, [("Mul", True)])
            v.vec_flat(bh, 64, [("Add", True)])
        elif cube:
            v.wait_flag("MTE3", "V", 2)
            v.vec_flat(bh, 64, [("Mul", True), ("Cast", True)])
            v.set_flag("V", "MTE3", 2)
            v.wait_flag("V", "MTE3", 2)
            v.copy_ub_to_gm(1, bh, 2)
            v.set_flag("MTE3", "V", 2)
            rh_ready.set(v, "MTE3")

    def vector_update(self, v: SimCore, flags: list[CrossFlagSim], cube: bool, last: bool) -> None:
        bh = self.bh
        h_ready, _, _, g2_ready = flags
        if not self.s.lbr and cube:
            v.wait_flag("V", "MTE2", 3)
            g2_ready.wait(v, "MTE2")
            v.copy_gm(1, bh, 4, "UB", src=WORKSPACE)
            v.set_flag("MTE2", "V", 3)
            v.wait_flag("MTE2", "V", 3)
            v.vec_flat(bh, 64, [("Add", True)])
            v.set_flag("V", "MTE2", 3)
        v.vec_flat(bh, 64, TANH)
        v.vec_flat(bh, 64, [("Sub", True), ("Mul", True), ("Add", True)])
        self.store_h(v, CAST, h_ready, last)

    def vector_begin(self, v: SimCore) -> None:
        s, bh = self.s, self.bh
        if s.h0:
            v.copy_gm(1, bh, 2, "UB", src=self.h0_src)
        if s.lbr:
            v.copy_gm(1, bh, 2, "UB", src=2)
        if s.h0 or s.lbr:
            v.set_flag("MTE2", "V", 1)
            v.wait_flag("MTE2", "V", 1)
        v.vec_flat(bh, 64, CAST if s.h0 else [("Dup", True)])
        if s.lbr:
            v.vec_flat(bh, 64, CAST)
        v.set_flag("V", "MTE2", 0)
        v.set_flag("MTE3", "V", 1)
        if not s.lbr:
            v.set_flag("V", "MTE2", 3)
            v.set_flag("MTE3", "V", 2)

    def vector_end(self, v: SimCore) -> None:
        v.wait_flag("MTE3", "V", 1)
        v.copy_ub_to_gm(1, self.bh, 2)
        v.wait_flag("V", "MTE2", 0)
        if not self.s.lbr:
            v.wait_flag("V", "MTE2", 3)
            v.wait_flag("MTE3", "V", 2)

    def block(self, c: SimCore, v: SimCore, _v1: SimCore, d: int) -> None:
        s, same = self.s, c is v
        if c.blocks > 0:
            c.barrier_all()
            if not same:
                v.barrier_all()
        flags = [CrossFlagSim(same, c.p) for _ in range(4)]  # h_ready, g_ready, rh_ready, g2_ready
        self.cube_begin(c)
        self.vector_begin(v)
        for step in range(s.seq):
            cube = step > 0 or s.h0
            if cube:
                self.cube_step(c, flags[0] if step else None, flags[1], OUT if step else self.h0_src,
                               self.g1 if s.lbr else 2 * self.h1)
            self.vector_gates(v, flags, cube)
            if cube and not s.lbr:
                self.cube_step(c, flags[2], flags[3], WORKSPACE, self.h1)
            self.vector_update(v, flags, cube, step == s.seq - 1)
        self.vector_end(v)
        self.cube_end(c)


def replay_gru_loop(spec: GruLoopSpec, params: dict, profile: Profile) -> Prediction:
    """templates/gru_loop_mixed.cpp.j2, instruction for instruction."""
    return launch_group(profile, spec.dirs, _GruReplay(spec, params).block)


FAMILY = register(Family("gru_loop_mixed", "gru_loop", "cube", gru_loop_rule, gru_loop_mte2, replay_gru_loop))
