"""The looped LSTM against the unrolled form it replaces: both priced by the cost model, logged per node ([OPT]
algorithm ... recurrence=looped ...). The frontend builds the looped form wherever the lstm_loop_mixed kernel takes
the node (codegen/frontend/onnx_rnn.py loop_problem); this prices that kernel (its rule tiling's replay) and the
unrolled form's recurrence at the same shape (an estimate: per direction and step one sibling GEMM [B, H] x [H, 4H]
on the Cube, none at the first step without h0, and three elementwise launches of B*H values, the gate programs the
unrolled form runs; the input GEMM is the same in both and left out)."""
from __future__ import annotations

from ..families.base import predicted_cycles
from ..ir.opspec import EltwiseSpec, GemmSpec, Opspec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..ir.recurrent_spec import LstmLoopSpec
from .tiling import choose_variant

PROGRAMS_PER_STEP = 3  # the unrolled LSTM step's Vector gate programs at O2 (docs/compiler.md)


def _cycles(spec: Opspec, profile: Profile) -> float:
    v = choose_variant(spec, profile, OptLog())
    return predicted_cycles(spec, v.family, v.params, profile)


def unrolled_cycles(spec: LstmLoopSpec, profile: Profile) -> float:
    """The unrolled recurrence's predicted cycles at this shape (the estimate above)."""
    gemm = _cycles(GemmSpec(spec.batch, spec.hidden, 4 * spec.hidden, False, False, split=spec.hidden), profile)
    program = _cycles(EltwiseSpec("add", spec.batch * spec.hidden), profile)
    cube_steps = spec.seq - (0 if spec.h0 else 1)
    return spec.dirs * (cube_steps * gemm + spec.seq * PROGRAMS_PER_STEP * program)


def log_choice(model: str, step: str, spec: LstmLoopSpec, profile: Profile, log: OptLog) -> None:
    looped, unrolled = _cycles(spec, profile), unrolled_cycles(spec, profile)
    launches = spec.dirs * (spec.seq - (0 if spec.h0 else 1) + PROGRAMS_PER_STEP * spec.seq)
    log.add("algorithm", f"{model}:{step}", "recurrence=looped" if looped <= unrolled else
            "recurrence=looped (unrolled predicted faster; the frontend builds the looped form)", "cost_model",
            looped=round(looped), unrolled_estimate=round(unrolled), unrolled_launches=launches,
            speedup=round(unrolled / looped, 2))
