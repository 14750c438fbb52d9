"""ONNX frontend, ConvTranspose (2-D): check, normalise (pads and output size resolved from auto_pad,
output_shape and output_padding as ONNX Runtime resolves them) and the shape rule. Lowering computes it as
stride-phase convolutions on the Cube (codegen/ir/conv_transpose.py); the attribute values whose phases are not
plain convolutions are refused here, naming the phase."""
from __future__ import annotations

from typing import Any

from ..ir.conv_transpose import phases, problem, resolve
from ..ir.graph import Graph, Node
from .onnx_base import Unsupported, as_ints, const_input, has_input, shape_of

_AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")

ACCEPTED_CONVTRANSPOSE = {
    "ConvTranspose": f"2-D; weight and bias constant; group: any count dividing the channels; strides, dilations: "
                     f"2 values >= 1; pads: 4 values >= 0; output_padding: 2 values < stride; output_shape: H, W; "
                     f"auto_pad: {', '.join(_AUTO_PADS)}; one group: any of these (an output phase no kernel tap "
                     f"reaches is the bias alone); more groups: every output phase reached by a kernel tap "
                     f"with non-negative pads on its convolution (the common exports: kernel >= stride, dilation 1, "
                     f"pads <= (kernel - 1) / 2; e.g. 2x2/2, 3x3/2 p1 op1, 4x4/2 p1, 16x16/8 p4)",
}


def check_convtranspose(node: Node, g: Graph) -> str | None:
    a = node.attrs
    w = const_input(g, node, 1)
    if w is None:
        return "the weight (input 1) is computed at run time; kiln bakes weights and needs it constant"
    if w.ndim != 4:
        return f"only 2-D ConvTranspose is supported (weight has rank {w.ndim})"
    if has_input(node, 2) and const_input(g, node, 2) is None:
        return "the bias (input 2) is computed at run time; kiln needs it constant"
    group = a.get("group", 1)
    if not isinstance(group, int) or group < 1 or w.shape[0] % group:
        return (f"group={group} with {w.shape[0]} input channels: group must be a positive integer dividing the "
                f"input channels (the ONNX spec)")
    if a.get("auto_pad", "NOTSET") not in _AUTO_PADS:
        return f"auto_pad={a['auto_pad']!r} is not one of {_AUTO_PADS}"
    if "kernel_shape" in a and as_ints(a["kernel_shape"]) != w.shape[2:]:
        return f"kernel_shape {list(a['kernel_shape'])} does not match the weight {list(w.shape)}"
    for key, length in (("strides", 2), ("dilations", 2), ("pads", 4), ("output_padding", 2)):
        if key in a and len(a[key]) != length:
            return f"{key}={list(a[key])}: only 2-D ConvTranspose is supported ({length} entries)"
    if any(s < 1 for s in a.get("strides", ())) or any(d < 1 for d in a.get("dilations", ())):
        return "strides and dilations must be >= 1"
    if any(p < 0 for p in a.get("pads", ())):
        return f"negative pads {list(a['pads'])} are not supported"
    strides = as_ints(a.get("strides", (1, 1)))
    if any(not 0 <= p < s for p, s in zip(as_ints(a.get("output_padding", (0, 0))), strides)):
        return f"output_padding={list(a['output_padding'])} must be >= 0 and smaller than the stride (as ONNX Runtime)"
    if "output_shape" in a and len(a["output_shape"]) != 2:
        return f"output_shape={list(a['output_shape'])}: 2 values (H, W) for a 2-D ConvTranspose"
    return None


def normalise_convtranspose(node: Node, g: Graph) -> dict[str, Any]:
    a = node.attrs
    w = g.initializers[node.inputs[1]]
    kernel = (int(w.shape[2]), int(w.shape[3]))
    strides = as_ints(a.get("strides", (1, 1)))
    dilations = as_ints(a.get("dilations", (1, 1)))
    output_padding = as_ints(a.get("output_padding", (0, 0)))
    x = shape_of(g, node.inputs[0])
    if len(x) != 4:
        raise Unsupported(f"the input has rank {len(x)}; a 2-D ConvTranspose reads an NCHW tensor (rank 4)")
    try:
        pads, out_hw = resolve((x[2], x[3]), kernel, strides, dilations, output_padding,
                               (a.get("auto_pad", "NOTSET"), as_ints(a.get("pads", (0, 0, 0, 0))),
                                as_ints(a.get("output_shape", ()))))
    except ValueError as e:
        raise Unsupported(str(e)) from None
    group = int(a.get("group", 1))
    whys = [problem(ph, axis) for axis, i in (("H", 0), ("W", 1))
            for ph in phases(x[2 + i], kernel[i], strides[i], dilations[i], pads[i], out_hw[i])]
    why = next((w for w in whys if w), "")
    if why and group != 1:
        raise Unsupported(f"{why} (kernel {list(kernel)}, strides {list(strides)}, dilations {list(dilations)}, pads "
                          f"{list(pads)}, group {group}); kiln computes a grouped ConvTranspose as stride-phase "
                          f"convolutions and accepts every phase reached by a tap with non-negative pads, as in the "
                          f"common exports (kernel >= stride, pads <= (kernel - 1) / 2); one group takes any")
    # phases=False: no stride-phase form (a phase no tap reaches, or one needing negative pads): GEMM + col2im only
    return {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads,
            "output_padding": output_padding, "out_hw": out_hw, "group": group, "phases": not why}


def infer_convtranspose(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    x = shape_of(g, node.inputs[0])
    w = g.initializers[node.inputs[1]].shape
    if x[1] != w[0]:
        raise Unsupported(f"input has {x[1]} channels, the weight {list(w)} expects {w[0]}")
    return [(x[0], int(w[1]) * attrs["group"], *attrs["out_hw"])]
