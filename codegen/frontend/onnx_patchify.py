"""ONNX frontend, the patch-embedding convolution (ViT's 16x16 stride-16 Conv): a Conv whose kernel equals its
stride, without pads, dilation or groups, reads each input pixel once, so it is a space-to-depth of the input (the
patches as channels) followed by a 1x1 Conv with the weight's taps moved into its input channels. The graph pass
rewrites it into that: Reshape -> Transpose -> Reshape (SpaceToDepth's ONNX definition, generalised to kh x kw
patches) and the 1x1 Conv, under the Conv's name. Why: the direct convolution keeps a band of kh input rows per
tile in L1, which for a 16x16 patch of a 224-wide image (3 channels padded to a C0 block) is over L1's size; the 1x1
form's reduction (C*kh*kw) is the Cube's usual K. Only patches of 8 or more a side are rewritten: smaller strided
convs (ConvNeXt's 4x4 stem) fit the direct form, which keeps their kernels and figures."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from .onnx_base import ShapeUnknown, rewrite_nodes, shape_of
from .onnx_depth_space import reshape_transpose_reshape

MIN_PATCH = 8  # the smallest kernel side rewritten (module docstring)


def _ints(node: Node, name: str, default: list[int]) -> list[int]:
    return [int(v) for v in node.attrs.get(name, default)]


def check_patchify(node: Node, g: Graph) -> str | None:
    """None for a patch embedding (kernel == stride >= MIN_PATCH, no pads, dilation 1, group 1, constant weight,
    H and W multiples of the patch); otherwise why not (the Conv then lowers as it is)."""
    w = node.inputs[1] if len(node.inputs) > 1 else ""
    if w not in g.initializers or g.initializers[w].ndim != 4:
        return "not a 2-D conv with a constant weight"
    k = list(g.initializers[w].shape[2:])
    auto_pad = node.attrs.get("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if (_ints(node, "strides", [1, 1]) != k or min(k) < MIN_PATCH or any(_ints(node, "pads", [0] * 4))
            or _ints(node, "dilations", [1, 1]) != [1, 1] or int(node.attrs.get("group", 1)) != 1
            or auto_pad not in ("NOTSET", "VALID")):
        return "not a patch embedding"
    try:  # an unbound dim is the Conv's own check's to report
        shape = shape_of(g, node.inputs[0])
    except ShapeUnknown:
        return "input shape unknown"
    if len(shape) != 4 or shape[2] % k[0] or shape[3] % k[1]:
        return "H, W not multiples of the patch"
    return None


def _rewrite(g: Graph, node: Node) -> tuple[list[Node], str]:
    x, w, *bias = node.inputs
    n, c, h, wd = shape_of(g, x)
    weight = g.initializers[w]
    o, _, kh, kw = weight.shape
    first, perm = (n, c, h // kh, kh, wd // kw, kw), (0, 3, 5, 1, 2, 4)
    out = (n, kh * kw * c, h // kh, wd // kw)
    w1 = f"{node.name}/weight1x1"
    g.initializers[w1] = np.ascontiguousarray(weight.transpose(0, 2, 3, 1).reshape(o, kh * kw * c, 1, 1))
    g.values[w1] = Value(w1, (o, kh * kw * c, 1, 1), g.values[w].dtype)
    p = f"{node.name}/patches"
    attrs = {"kernel_shape": [1, 1], "strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1], "group": 1}
    return (reshape_transpose_reshape(g, node.name, x, (first, perm, out), p, p)
            + [Node(node.name, "Conv", [p, w1, *bias], list(node.outputs), attrs, [node.name])],
            f"patches {kh}x{kw} as channels (Reshape {list(first)} -> Transpose {list(perm)} -> Reshape "
            f"{list(out)}) and a 1x1 Conv over {kh * kw * c} channels")


def expand_patchify(graph: Graph, log: list[str]) -> Graph:
    """Each patch-embedding Conv (check_patchify) as space-to-depth and a 1x1 Conv."""
    return rewrite_nodes(graph, ("Conv",), check_patchify, _rewrite, log, "expand_patchify")


def is_patch_embedding(node) -> bool:
    """An ONNX NodeProto that may be rewritten (the isolated check's reference asks before parsing the model)."""
    if node.op_type != "Conv":
        return False
    attrs = {a.name: list(a.ints) for a in node.attribute}
    k = attrs.get("kernel_shape", [])
    return len(k) == 2 and min(k) >= MIN_PATCH and attrs.get("strides") == k
