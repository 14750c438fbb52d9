"""Looped or unrolled, per LSTM / GRU node: the cost model's choice (the frontend asks through the chooser built here,
codegen/frontend/onnx_rnn.py expand_recurrent_nodes, for every node the looped kernel takes; the capability limits
stay the frontend's, loop_problem). Both forms are priced at the node's shape and logged ([OPT] algorithm ...
recurrence=looped|unrolled looped=<cycles> unrolled_estimate=<cycles>, reason cost_model):
  - looped: the lstm_loop_mixed / gru_loop_mixed kernel's rule tiling, replayed;
  - unrolled: an estimate of the recurrence it would build: per direction and step with a hidden state the sibling
    GEMM of the hidden projection [B, H] x [H, gates*H] on the Cube (a GRU without linear_before_reset: [H, 2H],
    then (r * h) [B, H] x [H, H] after one elementwise Mul), and per step three elementwise launches of B*H
    values, the gate programs the unrolled form runs at O2. The input GEMM is the same in both and left out."""
from __future__ import annotations

from collections.abc import Callable

from ..families.base import predicted_cycles
from ..ir.opspec import EltwiseSpec, GemmSpec, Opspec
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from ..ir.recurrent_spec import LOOP_SPECS, GruLoopSpec, LstmLoopSpec
from .tiling import choose_variant

PROGRAMS_PER_STEP = 3  # the unrolled step's Vector gate programs at O2 (docs/compiler.md)


def _cycles(spec: Opspec, profile: Profile) -> float:
    v = choose_variant(spec, profile, OptLog())
    return predicted_cycles(spec, v.family, v.params, profile)


def _gate_gemms(spec: LstmLoopSpec | GruLoopSpec) -> list[Opspec]:
    """The unrolled step's hidden-projection GEMMs (and a GRU's r * h Mul) per step with a hidden state."""
    b, h = spec.batch, spec.hidden
    if isinstance(spec, LstmLoopSpec):
        return [GemmSpec(b, h, 4 * h, False, False, split=h)]
    if spec.lbr:
        return [GemmSpec(b, h, 3 * h, False, False, split=h)]
    return [GemmSpec(b, h, 2 * h, False, False, split=h), EltwiseSpec("mul", b * h), GemmSpec(b, h, h, False, False)]


def unrolled_cycles(spec: LstmLoopSpec | GruLoopSpec, profile: Profile) -> tuple[float, int]:
    """The unrolled recurrence's predicted cycles and launches at this shape (the estimate above)."""
    gemms = _gate_gemms(spec)
    program = _cycles(EltwiseSpec("add", spec.batch * spec.hidden), profile)
    cube_steps = spec.seq - (0 if spec.h0 else 1)
    cycles = spec.dirs * (cube_steps * sum(_cycles(s, profile) for s in gemms) + spec.seq * PROGRAMS_PER_STEP * program)
    return cycles, spec.dirs * (cube_steps * len(gemms) + PROGRAMS_PER_STEP * spec.seq)


def choose(subject: str, spec: LstmLoopSpec | GruLoopSpec, profile: Profile, log: OptLog) -> bool:
    """True: the looped kernel (predicted no slower than the unrolled estimate); one [OPT] line either way."""
    looped = _cycles(spec, profile)
    unrolled, launches = unrolled_cycles(spec, profile)
    form = "looped" if looped <= unrolled else "unrolled"
    log.add("algorithm", subject, f"recurrence={form}", "cost_model", looped=round(looped),
            unrolled_estimate=round(unrolled), unrolled_launches=launches, speedup=round(unrolled / looped, 2))
    return form == "looped"


def chooser(model: str, profile: Profile, log: OptLog) -> Callable[[str, str, dict], bool]:
    """The frontend's recurrence chooser for one model: (node name, loop op LSTMLoop / GRULoop, the loop's
    attributes) -> looped?"""
    return lambda node, op, attrs: choose(f"{model}:{node}", LOOP_SPECS[op](attrs), profile, log)
