"""LayerNormalization over the channels of an NCHW tensor, as ConvNeXt exports it: Transpose(0,2,3,1) to NHWC,
LayerNormalization over the last axis (then Linear layers or a Transpose back). The fusion that would remove the
Transpose, a LayerNorm reading NC1HWC0 directly, needs each pixel's mean and variance over its C channels, which
NC1HWC0 holds as C1 blocks of C0 lanes H*W*C0 values apart: a reduction across blocks (C1 strided adds) and then
across the 16 lanes of one block per pixel, which no kernel family has (layernorm_vector reduces contiguous rows).
So the Transpose stays a relayout copy and the opportunity is audited (`channel_layernorm_unsupported`), with the
bytes the copy moves."""
from __future__ import annotations

from math import prod

from ..ir.graph import Graph
from ..ir.optlog import OptLog
from ..ir.tensor import C0, c1


def audit_channel_layernorm(g: Graph, model: str, enable: bool, log: OptLog, audit: list[dict]) -> None:
    """Logs and appends to `audit` every Transpose(0,2,3,1) -> LayerNormalization(last axis) of a 4-D tensor
    (`fusion_off` when ENABLE_FUSION=OFF)."""
    readers: dict[str, list[str]] = {}
    for n in g.nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n.name)
    by_name = {n.name: n for n in g.nodes}
    for t in g.nodes:
        if t.op_type != "Transpose" or tuple(t.attrs.get("perm", ())) != (0, 2, 3, 1):
            continue
        for ln in (by_name[r] for r in readers.get(t.outputs[0], [])):
            if ln.op_type != "LayerNormalization" or ln.inputs[0] != t.outputs[0] or ln.attrs.get("axis", -1) not in (
                    -1, 3):
                continue
            batch, ch, h, w = g.values[t.inputs[0]].shape
            if h * w == 1:  # one pixel: the Transpose is a view of the channels (lowering), nothing to remove
                continue
            detail = (f"LayerNorm over the {ch} channels of [{batch}, {ch}, {h}, {w}]: {c1(ch)} C0 blocks {h * w * C0} "
                      f"values apart in NC1HWC0, no kernel reduces across them; {t.name} stays a relayout copy of "
                      f"{prod((batch, ch, h, w)) * 2} bytes")
            reason = "channel_layernorm_unsupported" if enable else "fusion_off"
            log.add("fusion", f"{model}:{ln.name}", "Transpose+LayerNormalization:rejected", reason, detail=detail)
            audit.append({"node": ln.name, "into": t.name, "pattern": "Transpose+LayerNormalization",
                          "reason": reason, "detail": detail})
