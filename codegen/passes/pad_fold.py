"""Pad folded into the Conv reading it (a fusion decision, run first by codegen/passes/fusion.py fuse()): a Pad of
constant 0 on H and W only (pads >= 0) of a 4-D value read by one Conv and not a graph output is the Conv's own
zero padding, so its pads are added to the Conv's (top, left, bottom, right) and the Pad node goes. Exact: the
Conv reads the same zeros either way, whatever its stride, dilation, groups or auto_pad (resolved before, on the
padded shape). Every Pad is logged, folded or not; one left is refused by the lowering, naming it (there is no
Pad kernel)."""
from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.optlog import OptLog


def why_not_folded(g: Graph, pad: Node, readers: list[Node], outputs: set[str]) -> str:
    """'' when `pad` folds into its one reader, else what stops it."""
    a, shape = pad.attrs, g.values[pad.inputs[0]].shape
    p = a["pads"]
    if a["mode"] != "constant" or a["value"] != 0.0:
        return f"mode {a['mode']} value {a['value']:g}: only a constant 0 pad is the Conv's padding"
    if len(shape) != 4 or any(p[i] or p[4 + i] for i in (0, 1)) or any(v < 0 for v in p):
        return f"pads {list(p)} of a {len(shape)}-D input: only H and W of a 4-D input, each >= 0"
    if pad.outputs[0] in outputs or len(readers) != 1 or readers[0].op_type != "Conv" \
            or readers[0].inputs[0] != pad.outputs[0]:
        return (f"{pad.outputs[0]} is read by {[n.name for n in readers]} (a graph output: "
                f"{pad.outputs[0] in outputs}); it folds only into the one Conv reading it")
    return ""


def fold_pads(g: Graph, model: str, log: OptLog) -> list[dict]:
    """Fold every foldable Pad of `g` (in place); returns the audit rows of those left."""
    outputs = {v.name for v in g.outputs}
    audit, removed = [], set()
    for pad in [n for n in g.nodes if n.op_type == "Pad"]:
        readers = [n for n in g.nodes if pad.outputs[0] in n.inputs]
        why = why_not_folded(g, pad, readers, outputs)
        if why:
            log.add("fusion", f"{model}:{pad.name}", "Pad+Conv:rejected", "pad_not_foldable", detail=why)
            audit.append({"node": pad.name, "into": "", "pattern": "Pad+Conv", "reason": "pad_not_foldable",
                          "detail": why})
            continue
        conv, p = readers[0], pad.attrs["pads"]
        t, left, b, r = conv.attrs["pads"]
        conv.attrs = {**conv.attrs, "pads": (t + p[2], left + p[3], b + p[6], r + p[7])}
        conv.inputs = [pad.inputs[0], *conv.inputs[1:]]
        conv.source = (list(conv.source) or [conv.name]) + [pad.name]
        removed.add(pad.name)
        log.add("fusion", f"{model}:{pad.name}", "Fused(Pad+Conv)", "pad_into_conv", into=conv.name,
                pads=list(conv.attrs["pads"]))
    g.nodes = [n for n in g.nodes if n.name not in removed]
    return audit
