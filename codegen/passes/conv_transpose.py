"""Lowering of ConvTranspose (a function of the lowerer, as copy_rules: lowering.py is at its size limit), in one
of three built forms, all Cube convolutions (conv2d_cube_img2col, or grouped / depthwise as the group count says)
then, but for stride 1, one Vector kernel:

- stride_phase: each output phase (oh mod s_h, ow mod s_w) is one Conv over the original input with the phase's
  taps of the weight, flipped, input and output channels swapped (codegen/ir/conv_transpose.py), the bias and the
  fused activation (ReLU, Clip(0, hi)) applied by each; one copy_mte kernel interleaves the phases into the output.
  Stride 1: one Conv writes the output itself, no copy. Any shape whose every phase is reached by a tap with pads
  within the kernel (the frontend sets attrs["phases"] False for the others: one group only, the col2im form).
- gemm_depth_to_space: kernel == stride, no pads, no output_padding, dilation 1, one group (DBNet's 2x2 stride-2
  up-convs): the kernel windows do not overlap, so the op is one 1x1 Conv (a GEMM over the pixels, with bias and
  activation) to kh * kw * C_out channels (each tap's C_out padded to whole C0 blocks) whose result the copy moves
  to its places (a depth-to-space). The input is read once instead of s_h * s_w times; two launches.
- gemm_col2im: one group, any strides, pads, output_padding, dilations: the same 1x1 Conv without bias or
  activation, then one col2im_vector kernel scatter-adds the columns into the output and applies the bias and the
  activation once per output pixel (they do not commute with the sum). Two launches.

Which one: the cost model, per shape (codegen/select/conv_transpose.py; the lowerer's `convt_chooser`), from the
op instances each form would launch; without a chooser, the first form built (stride_phase where it exists)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ..ir import layouts
from ..ir.conv_transpose import phase_weight, phases
from ..ir.copy_spec import CopySpec, format_moves
from ..ir.graph import Fused, Node, OpInstance, Value
from ..ir.opspec import is_depthwise
from .copy_rules import copy_step
from .lowered import LowererState, Step, Storage

C0 = 16


@dataclass
class Form:
    """What one form launches: Conv nodes (with their OIHW weight, bias and output shape) and the copy's moves,
    move t reading conv output `sources[t]` (an index into convs) from byte `offsets[t]`."""
    name: str
    convs: list[tuple[Node, np.ndarray, np.ndarray | None, tuple[int, ...]]] = field(default_factory=list)
    moves: list[tuple[tuple[int, ...], tuple[int, ...], int]] = field(default_factory=list)
    sources: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    col2im: dict | None = None  # gemm_col2im: the Col2im kernel's attributes (instead of the copy's moves)


def phase_value(out: str, ph: int, pw: int, sh: int, sw: int) -> str:
    """The device-only value of one phase: out[..., ph::sh, pw::sw] (kiln.isolate derives its counterpart)."""
    return f"{out}@phase_{ph}_{pw}_{sh}_{sw}"


def _conv(node: Node, name: str, out: str, kernel: tuple[int, int], pads: tuple[int, ...],
          dilations: tuple[int, int], group: int) -> Node:
    """One of the form's Conv nodes: reads the ConvTranspose's input, its own weight and bias (`name`.w, .b)."""
    ins = [node.inputs[0], f"{name}.w"] + ([f"{name}.b"] if len(node.inputs) > 2 and node.inputs[2] else [])
    return Node(name, "Conv", ins, [out], {"kernel_shape": kernel, "strides": (1, 1), "pads": pads,
                                           "dilations": dilations, "group": group},
                list(node.source) or [node.name], node.fused)


def stride_phase(lw: LowererState, node: Node) -> Form:
    a, x, out = node.attrs, node.inputs[0], node.outputs[0]
    xs, ys = lw.shape(x), lw.shape(out)
    w = np.asarray(lw.g.initializers[node.inputs[1]], np.float32)
    b = np.asarray(lw.g.initializers[node.inputs[2]], np.float32) if len(node.inputs) > 2 and node.inputs[2] else None
    (kh, kw), (sh, sw), (dh, dw), pads = a["kernel_shape"], a["strides"], a["dilations"], a["pads"]
    n, c1, ho, wo = ys[0], -(-ys[1] // C0), ys[2], ys[3]
    single = sh == sw == 1
    form = Form("stride_phase")
    for ph in [p for p in phases(xs[2], kh, sh, dh, pads[0], ho) if p.count]:
        for pw in [p for p in phases(xs[3], kw, sw, dw, pads[1], wo) if p.count]:
            name = node.name if single else f"{node.name}.phase{ph.phase}_{pw.phase}"
            value = out if single else phase_value(out, ph.phase, pw.phase, sh, sw)
            conv = _conv(node, name, value, (len(ph.taps), len(pw.taps)),
                         (ph.pad_begin, pw.pad_begin, ph.pad_end, pw.pad_end), (ph.dilation, pw.dilation), a["group"])
            form.convs.append((conv, phase_weight(w, a["group"], ph.taps, pw.taps), b,
                               (ys[0], ys[1], ph.count, pw.count)))
            form.moves.append(((n, c1, ph.count, pw.count, C0),
                               (c1 * ho * wo * C0, ho * wo * C0, sh * wo * C0, sw * C0, 1),
                               (ph.phase * wo + pw.phase) * C0))
            form.sources.append(len(form.convs) - 1)
            form.offsets.append(0)
    return form


def depth_to_space_fits(node: Node) -> bool:
    """Non-overlapping windows that tile the output exactly: kernel == stride, no pads or output_padding."""
    a = node.attrs
    return (tuple(a["kernel_shape"]) == tuple(a["strides"]) != (1, 1) and not any(a["pads"])
            and not any(a["output_padding"]) and tuple(a["dilations"]) == (1, 1) and a["group"] == 1)


def tap_weight(lw: LowererState, node: Node) -> np.ndarray:
    """The GEMM forms' 1x1 weight (kh kw cpad, C_in, 1, 1): output channel (a, b, c) is tap (a, b) of channel c,
    each tap's C_out padded to whole C0 blocks with zeros."""
    w = np.asarray(lw.g.initializers[node.inputs[1]], np.float32)
    (kh, kw), cout, cin = node.attrs["kernel_shape"], w.shape[1], w.shape[0]
    w1 = np.zeros((kh, kw, -(-cout // C0) * C0, cin), np.float32)
    w1[:, :, :cout] = w.transpose(2, 3, 1, 0)
    return w1.reshape(-1, cin, 1, 1)


def gemm_depth_to_space(lw: LowererState, node: Node) -> Form:
    x, out = node.inputs[0], node.outputs[0]
    xs, ys = lw.shape(x), lw.shape(out)
    (kh, kw), n, cout = node.attrs["kernel_shape"], ys[0], ys[1]
    c1 = -(-cout // C0)
    cpad = c1 * C0
    b1 = None
    if len(node.inputs) > 2 and node.inputs[2]:
        b1 = np.zeros((kh, kw, cpad), np.float32)
        b1[:, :, :cout] = np.asarray(lw.g.initializers[node.inputs[2]], np.float32)
        b1 = b1.reshape(-1)
    value = f"{out}@d2s_{kh}_{kw}_{cpad}"
    conv = _conv(node, f"{node.name}.gemm", value, (1, 1), (0, 0, 0, 0), (1, 1), 1)
    form = Form("gemm_depth_to_space", [(conv, tap_weight(lw, node), b1, (n, kh * kw * cpad, xs[2], xs[3]))])
    ho, wo, h, wi = ys[2], ys[3], xs[2], xs[3]
    image = kh * kw * c1 * h * wi * C0
    for i in range(n):  # one move per image: its block of the GEMM's output, (a, b, c1, h, w, lane) row-major
        form.moves.append(((kh, kw, c1, h, wi, C0), (wo * C0, C0, ho * wo * C0, kh * wo * C0, kw * C0, 1),
                           i * c1 * ho * wo * C0))
        form.sources.append(0)
        form.offsets.append(i * image * 2)
    return form


def col2im_fits(node: Node) -> bool:
    """The GEMM + col2im form: one group (grouped ConvTranspose is priced for group 1 only) and no fused residual."""
    return node.attrs["group"] == 1 and not node.fused.residual and min(node.attrs["pads"][:2]) >= 0


def gemm_col2im(lw: LowererState, node: Node) -> Form:
    """One 1x1 Conv (a GEMM over the pixels) to kh kw C_out channels, no bias, then one col2im_vector kernel that
    scatter-adds its columns into the output and applies the bias and the fused activation once per pixel."""
    a, x, out = node.attrs, node.inputs[0], node.outputs[0]
    xs, ys = lw.shape(x), lw.shape(out)
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
    cpad = -(-ys[1] // C0) * C0
    value = f"{out}@cols_{kh}_{kw}_{cpad}"
    conv = replace(_conv(node, f"{node.name}.gemm", value, (1, 1), (0, 0, 0, 0), (1, 1), 1), fused=Fused())
    conv.inputs = conv.inputs[:2]  # no bias, no activation: the col2im kernel applies both, once per pixel
    form = Form("gemm_col2im", [(conv, tap_weight(lw, node), None, (xs[0], kh * kw * cpad, xs[2], xs[3]))])
    f = node.fused
    form.col2im = {"geometry": (ys[0], ys[1], xs[2], xs[3], ys[2], ys[3], kh, kw, sh, sw, dh, dw, a["pads"][0],
                                a["pads"][1]),
                   "bias": len(node.inputs) > 2 and bool(node.inputs[2]), "activation": f.activation}
    if f.activation == "Clip" and f.clip is not None:
        form.col2im.update(min=float(f.clip[0]), max=float(f.clip[1]))
    return form


def conv_instance(lw: LowererState, conv: Node, weight_shape: tuple[int, ...], xs: tuple[int, ...]) -> OpInstance:
    """The Conv op instance lowering's conv rule makes of `conv` (what the cost model prices)."""
    a, f = conv.attrs, conv.fused
    attrs = dict(input=xs, weight=weight_shape, strides=a["strides"], pads=a["pads"], dilations=a["dilations"],
                 group=a["group"], bias=len(conv.inputs) > 2, activation=f.activation)
    if f.activation == "Clip" and f.clip is not None:
        attrs.update(min=float(f.clip[0]), max=float(f.clip[1]))
    if not is_depthwise(a["group"], xs[1], weight_shape):
        attrs.update(lw.cube_dtype())
    return OpInstance(conv.name, "Conv", attrs)


def writes_output(node: Node, form: Form) -> bool:
    """The form's one convolution writes the output itself (stride 1): no copy."""
    return len(form.convs) == 1 and form.convs[0][0].outputs[0] == node.outputs[0]


def instances(lw: LowererState, node: Node, form: Form) -> list[OpInstance]:
    xs, ys = lw.shape(node.inputs[0]), lw.shape(node.outputs[0])
    out = [conv_instance(lw, c, tuple(w.shape), xs) for c, w, _, _ in form.convs]
    if form.col2im is not None:
        out.append(OpInstance(f"{node.name}.col2im", "Col2im", form.col2im))
    elif not writes_output(node, form):
        numel = ys[0] * -(-ys[1] // C0) * ys[2] * ys[3] * C0
        out.append(OpInstance(f"{node.name}.interleave", "Copy", {"out_numel": numel,
                                                                  "moves": format_moves(form.moves),
                                                                  "activation": "", "bias": False}))
    return out


def emit(lw: LowererState, node: Node, form: Form) -> None:
    out, ys = node.outputs[0], lw.shape(node.outputs[0])
    values = []
    for conv, w, b, shape in form.convs:
        lw.g.initializers[conv.inputs[1]] = w
        if b is not None:
            lw.g.initializers[conv.inputs[2]] = b
        lw.g.values[conv.outputs[0]] = Value(conv.outputs[0], shape)
        lw.conv(conv)
        values.append(lw.device[conv.outputs[0]])
    if form.col2im is not None:
        ins = [values[0]]
        if form.col2im["bias"]:
            ins.append(lw.weight(f"{node.name}.col2im.b", layouts.pad_bias(
                np.asarray(lw.g.initializers[node.inputs[2]], np.float32))))
        lw.device[out] = lw.new_value(out, Storage("NC1HWC0", ys))
        lw.steps.append(Step("kernel", f"{node.name}.col2im", list(node.source) or [node.name], [node.op_type], ins,
                             out, instance=instances(lw, node, form)[-1]))
        return
    if writes_output(node, form):
        return
    ins = []
    for t, (src, offset) in enumerate(zip(form.sources, form.offsets)):
        if offset == 0 and form.sources.count(src) == 1:
            ins.append(values[src])
            continue
        numel = int(np.prod(form.moves[t][0]))
        ins.append(lw.new_value(f"{values[src]}@image{t}", Storage("ND", (numel,)), alias_of=values[src],
                                offset=offset))
    spec = CopySpec(ys[0] * -(-ys[1] // C0) * ys[2] * ys[3] * C0, format_moves(form.moves))
    lw.device[out] = lw.new_value(out, Storage("NC1HWC0", ys))
    copy_step(lw, node, spec, ins, out, name=f"{node.name}.interleave")


def conv_transpose(lw: LowererState, node: Node) -> None:
    a = node.attrs
    forms = {"stride_phase": stride_phase(lw, node)} if a.get("phases", True) else {}
    if depth_to_space_fits(node):
        forms["gemm_depth_to_space"] = gemm_depth_to_space(lw, node)
    if col2im_fits(node):
        forms["gemm_col2im"] = gemm_col2im(lw, node)
    chooser = lw.convt_chooser
    name = next(iter(forms)) if chooser is None else chooser(
        node, lw.g, {k: instances(lw, node, f) for k, f in forms.items()})
    form = forms[name]
    lw.decisions.append(f"{node.name}: ConvTranspose {a['kernel_shape']} stride {a['strides']} dilation "
                        f"{a['dilations']} pads {list(a['pads'])} as {name}: {len(form.convs)} Conv kernel(s) of taps "
                        f"{[c.attrs['kernel_shape'] for c, *_ in form.convs]}"
                        + ("" if len(instances(lw, node, form)) == len(form.convs) else " and a copy_mte kernel"))
    emit(lw, node, form)
