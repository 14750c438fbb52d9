"""LayerNormalization over the channels of an NCHW tensor, as ConvNeXt exports it: Transpose(0,2,3,1) to NHWC,
LayerNormalization over the last axis (then Linear layers or a Transpose back). Fused, the two are one
channel_layernorm_vector kernel (the ChannelLayerNorm node): it reads the activation as NC1HWC0 holds it (for a
tile of pixels, the C1 channel blocks H*W*16 values apart: one strided MTE2 copy) and writes the normalised rows
[N*H*W, C] the next MatMul reads, so the transposed tensor is never stored: one launch instead of two (the
Transpose's copy_mte kernel and layernorm_vector over its rows) and the copy's bytes saved.

Taken when ENABLE_FUSION=ON, nothing else reads the Transpose's result (nor is it a graph output), the LayerNorm's
scale and bias are constants of C values and its Mean/InvStdDev outputs are unused, MAX_FUSION_DEPTH >= 2, and
the cost model predicts fewer cycles for the fused kernel than for the copy plus the row LayerNorm (both in the
log line; without a profile to price on, fusion takes it). A one-pixel tensor (after a GlobalAveragePool) is not
an opportunity: its Transpose is a view. Every opportunity is logged; the ones not taken join the fusion audit."""
from __future__ import annotations

from collections.abc import Callable
from math import prod

import numpy as np

from ..ir.channel_norm_spec import ChannelNormSpec
from ..ir.graph import Graph, Node, OpInstance
from ..ir.optlog import OptLog
from ..ir.reduce_spec import ROW_MAX_LENGTH
from ..ir.tensor import C0, c1
from .lowered import LowererState, Step
from .pricing import unpriced


def _pairs(g: Graph) -> list[tuple[Node, Node, dict[str, list[str]]]]:
    """(Transpose, LayerNormalization, readers) for each Transpose(0,2,3,1) of a 4-D tensor of more than one pixel
    read by a LayerNormalization over its last axis."""
    readers: dict[str, list[str]] = {}
    for n in g.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n.name)
    by_name = {n.name: n for n in g.nodes}
    out = []
    for t in g.nodes:
        if t.op_type != "Transpose" or tuple(t.attrs.get("perm", ())) != (0, 2, 3, 1):
            continue
        for ln in (by_name[r] for r in readers.get(t.outputs[0], [])):
            if ln.op_type != "LayerNormalization" or ln.inputs[0] != t.outputs[0] or ln.attrs.get("axis", -1) not in (
                    -1, 3):
                continue
            _, _, h, w = g.values[t.inputs[0]].shape
            if h * w > 1:  # one pixel: the Transpose is a view of the channels (lowering), nothing to remove
                out.append((t, ln, readers))
    return out


def _unsupported(g: Graph, t: Node, ln: Node, readers: dict[str, list[str]], limits) -> tuple[str, str]:
    """(reason, detail) why the pair stays two kernels before pricing, or ("", "")."""
    ch = g.values[t.inputs[0]].shape[1]
    params = [v for v in ln.inputs[1:3] if v]
    if not limits.enable:
        return "fusion_off", "ENABLE_FUSION=OFF"
    if readers.get(t.outputs[0], []) != [ln.name] or t.outputs[0] in {v.name for v in g.outputs}:
        return "multiple_consumers", f"{t.outputs[0]} is also read elsewhere"
    if any(v not in g.initializers or g.initializers[v].size != ch for v in params) or any(ln.outputs[1:]):
        return "channel_layernorm_unsupported", ("the LayerNorm's scale and bias must be constants of the channel "
                                                 "count and its Mean/InvStdDev outputs unused")
    if ch > ROW_MAX_LENGTH:
        return "channel_layernorm_unsupported", f"{ch} channels > {ROW_MAX_LENGTH}"
    if limits.max_depth < 2:
        return "depth_limit", f"depth 2 > MAX_FUSION_DEPTH={limits.max_depth}"
    return "", ""


def fuse_channel_layernorm(g: Graph, model: str, limits, log: OptLog, audit: list[dict], fused: list[dict],
                           price: Callable[..., tuple[float, float]] | None = None) -> None:
    """Rewrite `g` (in place): each Transpose(0,2,3,1) -> LayerNormalization(last axis) the rules and the cost
    model admit becomes one ChannelLayerNorm node reading the Transpose's input; every pair is logged, the ones not
    taken appended to `audit`, the taken ones to `fused`. price(spec, profile) -> (fused, unfused) cycles."""
    removed: set[str] = set()
    for t, ln, readers in _pairs(g):
        batch, ch, h, w = g.values[t.inputs[0]].shape
        spec = ChannelNormSpec(batch, ch, h, w, float(np.float32(ln.attrs.get("epsilon", 1e-5))))
        pattern, subject = "Transpose+LayerNormalization", f"{model}:{ln.name}"
        copy = f"the Transpose's copy of {prod((batch, ch, h, w)) * 2} bytes"
        reason, detail = _unsupported(g, t, ln, readers, limits)
        cycles: dict = {}
        too_large = unpriced((batch, ch, h, w))
        if not reason and price is not None and limits.profile is not None and too_large:
            reason, detail = "not_priced", f"{t.inputs[0]}: {too_large}"
        elif not reason and price is not None and limits.profile is not None:
            one, two = price(spec, limits.profile)
            cycles = {"fused_cycles": round(one), "unfused_cycles": round(two), "profile": limits.profile.name}
            if one >= two:
                reason, detail = "channel_layernorm_slower", f"{round(one)} >= {round(two)} cycles"
        if reason:
            log.add("fusion", subject, f"{pattern}:rejected", reason, detail=f"{detail}; {t.name} stays {copy}",
                    **cycles)
            audit.append({"node": ln.name, "into": t.name, "pattern": pattern, "reason": reason,
                          "detail": f"{detail}; {t.name} stays {copy}"})
            continue
        where = (f"{ch} channels of [{batch}, {ch}, {h}, {w}] read as NC1HWC0 ({c1(ch)} C0 blocks {h * w * C0} "
                 f"values apart), rows [{batch * h * w}, {ch}] written; saves {copy}")
        ln.op_type, ln.inputs = "ChannelLayerNorm", [t.inputs[0], *ln.inputs[1:3]]
        ln.source = [t.name, *(ln.source or [ln.name])]
        ln.fused.ops, ln.fused.op_types = [t.name], ["Transpose"]
        removed.add(t.name)
        log.add("fusion", subject, "Fused(Transpose+LayerNormalization)", "channel_layernorm", into=ln.name,
                where=where, **cycles)
        fused.append({"node": t.name, "into": ln.name, "pattern": pattern, "where": where})
    g.nodes = [n for n in g.nodes if n.name not in removed]


def lower_channel_layernorm(lw: LowererState, node: Node) -> None:
    """A ChannelLayerNorm node: the channel_layernorm_vector kernel, NC1HWC0 in, rows out (the LayerNorm's own
    NHWC output value), gamma and beta (zeros when absent) as fp32 weights."""
    x = node.inputs[0]
    n, c, h, w = lw.shape(x)
    gamma = np.asarray(lw.g.initializers[node.inputs[1]], np.float32).reshape(-1)
    beta = np.asarray(lw.g.initializers[node.inputs[2]], np.float32).reshape(-1) if len(node.inputs) > 2 and \
        node.inputs[2] else np.zeros_like(gamma)
    ins = [lw.act(node, x, "NC1HWC0"), lw.weight(f"{node.name}.gamma", gamma), lw.weight(f"{node.name}.beta", beta)]
    attrs = {"input": (n, c, h, w), "epsilon": float(node.attrs.get("epsilon", 1e-5)), "activation": "",
             "bias": False}
    out = lw.out(node, "ND")
    lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], ["Transpose", "LayerNormalization"],
                         ins, out, instance=OpInstance(node.name, "ChannelLayerNorm", attrs)))
    lw.decisions.append(f"{node.name}: LayerNorm over the {c} channels of {x} read as NC1HWC0, written as rows "
                        f"[{n * h * w}, {c}]: one kernel, no transposed copy")
