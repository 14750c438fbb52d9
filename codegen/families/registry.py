"""The kernel families, a line each (one module per family: codegen/families/<name>.py, its template
templates/<name>.cpp.j2). A family's kind is the op kind it implements; where several families implement one
kind, the kind's chooser picks among them (CHOOSERS), otherwise the first family of the kind whose `matches`
accepts the spec.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import KilnError
from ..ir.channel_norm_spec import ChannelNormSpec
from ..ir.opspec import Opspec
from ..ir.optlog import OptLog
from . import (
    attention_flash,
    avgpool2d_vector,
    batched_gemm_cube,
    channel_gather_mte,
    channel_layernorm_vector,
    col2im_vector,
    conv2d_algorithm,
    conv2d_cube_img2col,
    conv2d_grouped_cube,
    conv2d_vector,
    conv2d_winograd,
    copy_mte,
    dwconv2d_vector,
    eltwise_program_vector,
    eltwise_vector,
    gather_mte,
    gelu_vector,
    gemm_cube,
    global_avgpool_vector,
    gru_loop_mixed,
    layernorm_vector,
    logsoftmax_vector,
    lstm_loop_mixed,
    maxpool2d_vector,
    reduce_vector,
    resize_vector,
    softmax_vector,
    transpose_mte,
)
from .base import FAMILIES, Family, Variant, fits, input_reads, predict, predicted_cycles, record

__all__ = ["FAMILIES", "ORDER", "input_reads", "predict", "predicted_cycles", "record"]

ORDER: tuple[Family, ...] = (
    conv2d_cube_img2col.FAMILY,
    conv2d_winograd.FAMILY,
    conv2d_grouped_cube.FAMILY,
    conv2d_vector.FAMILY,
    gemm_cube.FAMILY,
    batched_gemm_cube.FAMILY,
    dwconv2d_vector.FAMILY,
    eltwise_vector.FAMILY,
    eltwise_program_vector.FAMILY,
    gelu_vector.FAMILY,
    maxpool2d_vector.FAMILY,
    avgpool2d_vector.FAMILY,
    global_avgpool_vector.FAMILY,
    softmax_vector.FAMILY,
    logsoftmax_vector.FAMILY,
    layernorm_vector.FAMILY,
    channel_layernorm_vector.FAMILY,
    transpose_mte.FAMILY,
    channel_gather_mte.FAMILY,
    copy_mte.FAMILY,
    attention_flash.FAMILY,
    resize_vector.FAMILY,
    reduce_vector.FAMILY,
    gather_mte.FAMILY,
    lstm_loop_mixed.FAMILY,
    col2im_vector.FAMILY,
    gru_loop_mixed.FAMILY,
)

# Kinds implemented by several families, each with the function that chooses among them
# (spec, profile, log, options, pinned, search) -> Variant, and the family a kernel-list tiling pin selects.
# Keyed by kind, so each function is called with a spec of its kind only: the spec's type is the kind's class.
CHOOSERS: dict[str, Callable[..., Variant]] = {"conv2d": conv2d_algorithm.choose_conv_algorithm}
PINS: dict[str, Callable[[Any, str], tuple[str, dict]]] = {"conv2d": conv2d_algorithm.pinned_family}


def family(name: str) -> Family:
    return FAMILIES[name]


def family_for(spec: Opspec) -> Family:
    """The family the plain rule uses for `spec` (for a kind with a chooser: its first family)."""
    for f in ORDER:
        if f.kind == spec.kind and f.matches(spec):
            return f
    raise KilnError("tiling", spec.name, f"no kernel family implements a {spec.kind} kernel")


def pinned_family(spec: Opspec, pinned: str) -> tuple[Family, dict]:
    """The family (and implied parameters) of a kernel-list tiling pin."""
    if spec.kind in PINS:
        name, extra = PINS[spec.kind](spec, pinned)
        return FAMILIES[name], extra
    return family_for(spec), {}


def attention_capacity(head_dim: int, profile) -> str:
    """Why no attention kernel tile fits `profile` at this head dim ("" if one does): fusion asks before fusing."""
    return attention_flash.attention_capacity_problem(head_dim, profile)


def rule_cycles(spec: Opspec, profile) -> tuple[float, str]:
    """Predicted cycles of the variant the rule gives `spec` on `profile` (a kind with a chooser: the chooser's,
    without the tiling search) and the first on-chip buffer it overflows ("" if none): fusion's cost comparisons
    (codegen/passes/program_epilogue.py, channel_norm_cycles) ask this."""
    chooser = CHOOSERS.get(spec.kind)
    v = chooser(spec, profile, OptLog()) if chooser else family_for(spec).choose(spec, profile, OptLog(), False)
    return predicted_cycles(spec, v.family, v.params, profile), fits(profile, v.buffers) or ""


def channel_norm_cycles(spec: ChannelNormSpec, profile) -> tuple[float, float]:
    """(fused, unfused) predicted cycles of a LayerNorm over channels after a Transpose(0,2,3,1): its one kernel,
    against the Transpose's copy plus the LayerNorm over rows (rule tilings). Fusion asks before fusing."""
    unfused = channel_layernorm_vector.unfused_specs(spec)
    return rule_cycles(spec, profile)[0], sum(rule_cycles(s, profile)[0] for s in unfused)


def tunable() -> dict[str, tuple[str, ...]]:
    """Family -> the parameters `kiln tune`, tuning records and pins set (families that have any)."""
    return {f.name: f.tunable for f in ORDER if f.tunable}
