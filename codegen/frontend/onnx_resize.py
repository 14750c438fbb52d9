"""ONNX frontend, Resize (opsets 10..19; Upsample of opsets 7..9 arrives as Resize through the version converter,
whose Resize-10 semantics restore_resize10 keeps): check, normalise and the shape rule. kiln resizes H and W of a
4-D NCHW tensor (N and C scales 1), nearest or linear, with constant scales or sizes."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.resize_spec import COORDINATE_MODES, NEAREST_MODES
from .onnx_base import Unsupported, as_ints, const_input, has_input, shape_of

ACCEPTED_RESIZE = {
    "Resize": f"mode: nearest, linear (bilinear over H, W); coordinate_transformation_mode: "
              f"{', '.join(COORDINATE_MODES)}; nearest_mode: {', '.join(NEAREST_MODES)}; antialias: 0; "
              f"exclude_outside: 0; keep_aspect_ratio_policy: stretch; axes: any; roi: empty (ignored); scales or "
              f"sizes constant, 4-D NCHW input with N and C unchanged",
}


MIXED_RESIZE10 = "simple (floor up, ceil down)"  # restore_resize10's mark for what no Resize-11 mode says


def scaled_size(size: int, scale: float) -> int:
    """ONNX Runtime's output length for a scale: floor(size * scale) in float32."""
    return int(np.float32(size) * np.float32(scale))


def check_resize(node: Node, g: Graph) -> str | None:
    a = node.attrs
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear"):
        return f"mode={mode!r} is not supported (accepted: nearest, linear)"
    coord = a.get("coordinate_transformation_mode", "half_pixel")
    if coord not in COORDINATE_MODES:
        return f"coordinate_transformation_mode={coord!r} is not supported (accepted: {', '.join(COORDINATE_MODES)})"
    if mode == "nearest" and a.get("nearest_mode") == MIXED_RESIZE10:
        return ("a Resize-10 / Upsample nearest that upsamples one axis and downsamples another (it rounds down on "
                "one, up on the other) is not supported: accepted, all scales >= 1 or all <= 1")
    if mode == "nearest" and a.get("nearest_mode", "round_prefer_floor") not in NEAREST_MODES:
        return f"nearest_mode={a['nearest_mode']!r} is not supported (accepted: {', '.join(NEAREST_MODES)})"
    for key, want in (("antialias", 0), ("exclude_outside", 0)):
        if a.get(key, want) != want:
            return f"{key}={a[key]} is not supported (only {want})"
    if a.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        return f"keep_aspect_ratio_policy={a['keep_aspect_ratio_policy']!r} is not supported (only stretch)"
    for i, what in ((2, "scales"), (3, "sizes")):
        if has_input(node, i) and const_input(g, node, i) is None:
            return f"{what} (input {i}) is computed at run time; kiln needs it constant"
    scales, sizes = (const_input(g, node, i) for i in (2, 3))
    if (scales is None or scales.size == 0) == (sizes is None or sizes.size == 0):
        return "give exactly one of scales (input 2) and sizes (input 3), constant and not empty"
    return None


def _full(node: Node, rank: int, values, fill) -> list:
    """scales or sizes over every axis (opset 18's `axes` names the ones given)."""
    values = list(np.asarray(values).reshape(-1))
    axes = [x % rank for x in as_ints(node.attrs["axes"])] if "axes" in node.attrs else list(range(rank))
    if len(axes) != len(values):
        raise Unsupported(f"{len(values)} scales/sizes for {len(axes)} axes")
    out = list(fill)
    for axis, v in zip(axes, values):
        out[axis] = v
    return out


def normalise_resize(node: Node, g: Graph) -> dict[str, Any]:
    x = shape_of(g, node.inputs[0])
    if len(x) != 4:
        raise Unsupported(f"input has shape {list(x)}; kiln resizes H and W of a 4-D NCHW tensor")
    scales, sizes = const_input(g, node, 2), const_input(g, node, 3)
    if sizes is not None and sizes.size:
        out = [int(v) for v in _full(node, 4, sizes, x)]
        factors = [float(np.float32(o) / np.float32(i)) for o, i in zip(out, x)]
    else:
        factors = [float(np.float32(v)) for v in _full(node, 4, scales, [1.0] * 4)]
        out = [scaled_size(i, s) for i, s in zip(x, factors)]
    if out[:2] != list(x[:2]):
        raise Unsupported(f"resizes N or C ({list(x)} -> {out}); only H and W are resized (N and C scales 1)")
    if min(out[2:]) < 1:
        raise Unsupported(f"the output {out} is empty")
    mode = node.attrs.get("mode", "nearest")
    return {"mode": mode, "coord": node.attrs.get("coordinate_transformation_mode", "half_pixel"),
            "nearest": node.attrs.get("nearest_mode", "round_prefer_floor") if mode == "nearest" else "",
            "scales": (factors[2], factors[3]), "out_hw": (out[2], out[3])}


def infer_resize(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = shape_of(g, node.inputs[0])
    return [(x[0], x[1], *attrs["out_hw"])]


def restore_resize10(original, converted) -> None:
    """onnx's version converter turns Upsample (opsets 7..9) and Resize-10 into Resize-11+ with the new defaults
    (half_pixel, round_prefer_floor), which compute something else. Their semantics (ONNX Runtime's): asymmetric
    coordinates, and nearest rounds down when upsampling, up when downsampling (per axis). Set on the converted
    node (found by its output); a nearest resize that upsamples one axis and downsamples another has no
    Resize-11 equivalent and is marked for the check to refuse."""
    from onnx import helper
    old = {n.output[0]: n for n in original.graph.node if n.op_type in ("Upsample", "Resize") and n.output}
    for n in converted.graph.node:
        if n.op_type != "Resize" or not n.output or n.output[0] not in old:
            continue
        attrs = {a.name: a for a in n.attribute}
        for key in ("coordinate_transformation_mode", "nearest_mode"):
            if key in attrs:
                n.attribute.remove(attrs[key])
        n.attribute.append(helper.make_attribute("coordinate_transformation_mode", "asymmetric"))
        factors = _old_scales(original, old[n.output[0]])
        down, up = any(f < 1 for f in factors), any(f > 1 for f in factors)
        rounding = "ceil" if down and not up else "floor" if not down else MIXED_RESIZE10
        n.attribute.append(helper.make_attribute("nearest_mode", rounding))


def _old_scales(model, node) -> list[float]:
    """The scales of an Upsample / Resize-10 node (attribute, initializer or Constant); [] when not constant."""
    from onnx import helper, numpy_helper
    for a in node.attribute:
        if a.name == "scales":
            return list(helper.get_attribute_value(a))
    name = node.input[1] if len(node.input) > 1 else ""
    for t in model.graph.initializer:
        if t.name == name:
            return list(numpy_helper.to_array(t).reshape(-1))
    for c in model.graph.node:
        if c.op_type == "Constant" and c.output and c.output[0] == name:
            return list(numpy_helper.to_array(c.attribute[0].t).reshape(-1))
    return []
