"""ConvTranspose: the cost model's comparison of the four ways to compute it, logged per node ([OPT] algorithm
... conv_transpose=...). Lowering builds three forms (codegen/passes/conv_transpose.py) and takes the one this
module's chooser prices cheapest (the sum of its launches' predicted cycles, rule tilings; a form none of whose
tilings fits is not offered: refused=...); one more is priced as an estimate, so the log says what it would cost
at this shape:

- stride_phase (built, any shape): s_h * s_w Conv kernels over the original input, each with its taps of the
  weight (no zero multiplied), plus one copy_mte interleave.
- gemm_depth_to_space (built where kernel == stride, no pads: DBNet's up-convs): one 1x1 Conv to kh*kw*C_out
  channels and one copy_mte depth-to-space.
- gemm_col2im (built for one group, any strides, pads, dilations): the same 1x1 Conv without bias, then one
  col2im_vector kernel that scatter-adds the columns into the output (strided vadds, one per tap row and column
  per output row) and applies the bias and the fused activation once per pixel.
- zero_insert (estimate): one Conv (stride 1, pads d (k - 1) - p) over the input with s - 1 zeros inserted between
  pixels: the conv's predicted cycles at that size (s_h * s_w times the MACs, most of them on zeros), plus a Vector
  launch that writes the dilated tensor (each input row GM->UB as one burst per pixel, each output row UB->GM, the
  zeros laid once per buffer; no such kernel is built). A grouped ConvTranspose has the stride-phase form only.

Typical shapes (predicted cycles of the rule tilings, launches in brackets; benchmarks/bench_conv_transpose.py):

| shape (910B, fp16) | built, chosen | stride_phase | gemm_depth_to_space | gemm_col2im | zero_insert (est.) |
| --- | --- | --- | --- | --- | --- |
| DBNet up-conv 1: 64x160x160 -> 64, 2x2/2 | gemm_depth_to_space | 121,636 (5) | 61,927 (2) | 61,927 (2) | 151,218 (2) |
| DBNet up-conv 2: 64x320x320 -> 1, 2x2/2 | gemm_depth_to_space | 265,207 (5) | 94,892 (2) | 94,892 (2) | 697,972 (2) |
| U-Net decoder: 256x64x64 -> 128, 4x4/2 p1 | gemm_col2im | 142,203 (5) | - | 103,563 (2) | 219,000 (2) |
| FCN upscore: 21x32x32 -> 21, 4x4/2 p1 | gemm_col2im | 62,424 (5) | - | 25,780 (2) | 35,330 (2) |
| PyTorch decoder: 128x40x40 -> 64, 3x3/2 p1 op1 | gemm_col2im | 74,689 (5) | - | 32,356 (2) | 53,410 (2) |

The zero-free forms beat zero insertion wherever the map is large (DBNet 2: 2.8x less than the phases, 7x less
than zero insertion). Where windows overlap (U-Net, FCN, 3x3/2) the GEMM + col2im wins: 27% fewer cycles than the
phases on U-Net, 2.4x fewer on FCN's small map and 2.3x on the PyTorch decoder (the phases' five launches of about
11k cycles each dominate there); the col2im kernel reads every column value once, as the phases' interleave copy
reads every output value once. Where the windows do not overlap (DBNet) it ties with the depth-to-space copy
(both move the same bytes and are bound by them) and the tie goes to the depth-to-space form, listed first.
"""
from __future__ import annotations

from math import ceil

from .. import KilnError
from ..cost.model import PingPongSim, Prediction, SimCore, launch, run
from ..families.base import predicted_cycles
from ..ir.graph import Graph, Node, OpInstance
from ..ir.opspec import C0, Opspec, opspec_of
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .tiling import choose_variant


def _cycles(spec: Opspec, profile: Profile) -> float:
    """The rule tiling's predicted cycles (no search: every form priced alike, and cheaply)."""
    v = choose_variant(spec, profile, OptLog())
    return predicted_cycles(spec, v.family, v.params, profile)


def _dilate_replay(geom: tuple[int, int, int, int, int, int], params: dict, profile: Profile) -> Prediction:
    """The zero-insertion launch as a Vector kernel would issue it: rows of one channel block's plane per item."""
    planes, h, w, sh, sw, _ = geom
    hz, wz = (h - 1) * sh + 1, (w - 1) * sw + 1
    rows = max(1, min(h, profile.capacity["UB"] // 2 // (sh * wz * C0 * 2)))
    items = planes * ceil(h / rows)
    per_block = max(1, ceil(items / profile.cores_for("vector")))

    def block(core: SimCore, b: int) -> None:
        core.vec("Dup", False, ceil(rows * sh * wz * C0 / 128))
        q = PingPongSim(core, "MTE2", "MTE3", 0)
        for i in range(b * per_block, min(items, (b + 1) * per_block)):
            r0 = (i % ceil(h / rows)) * rows
            r = min(rows, h - r0)
            s = q.slot(i - b * per_block)
            q.acquire_for_write(s)
            for _ in range(r):
                core.copy_gm(w, C0, 2, "UB", src=0)
            q.written(s)
            q.acquire_for_read(s)
            core.copy_ub_to_gm(1, min(r * sh, hz - r0 * sh) * wz * C0, 2)
            q.released(s)
        q.drain()

    return launch(profile, "vector", ceil(items / per_block), block)


def _conv_instance(node: Node, g: Graph, x: tuple[int, ...], options) -> OpInstance:
    """The zero-insertion form's Conv: stride 1 over the dilated input, the flipped weight's shape."""
    a = node.attrs
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_shape"], a["strides"], a["dilations"]
    pt, pl, pb, pr = a["pads"]
    oph, opw = a["output_padding"]
    w = g.initializers[node.inputs[1]].shape
    group = a["group"]
    act: dict = {"activation": node.fused.activation}
    if node.fused.activation == "Clip" and node.fused.clip is not None:
        act.update(min=float(node.fused.clip[0]), max=float(node.fused.clip[1]))
    pads = (dh * (kh - 1) - pt, dw * (kw - 1) - pl, dh * (kh - 1) - pb + oph, dw * (kw - 1) - pr + opw)
    dtype = {} if options.kiln_dtype == "fp16" else {"dtype": options.kiln_dtype}
    return OpInstance(node.name, "Conv", dict(
        input=(x[0], x[1], (x[2] - 1) * sh + 1, (x[3] - 1) * sw + 1), weight=(w[1] * group, w[0] // group, kh, kw),
        strides=(1, 1), pads=tuple(max(0, p) for p in pads), dilations=(dh, dw), group=group,
        bias=len(node.inputs) > 2 and bool(node.inputs[2]), **act, **dtype))


def estimates(node: Node, g: Graph, profile: Profile, options) -> dict[str, tuple]:
    """form -> (predicted cycles, launches) of the form not built (module docstring): zero insertion."""
    x = tuple(g.values[node.inputs[0]].shape)
    sh, sw = node.attrs["strides"]
    forms: dict[str, tuple] = {}
    if (sh, sw) != (1, 1):  # stride 1: the zero-free convolution is the stride-phase form itself
        conv = _cycles(opspec_of(_conv_instance(node, g, x, options)), profile)
        dilate = run(_dilate_replay, (x[0] * ceil(x[1] / C0), x[2], x[3], sh, sw, 0), {}, profile).cycles
        forms["zero_insert"] = (conv + dilate, 2)
    return forms


def chooser(model: str, profile: Profile, options, log: OptLog):
    """The lowerer's convt_chooser: (node, graph, {built form: its op instances}) -> the form with the fewest
    predicted cycles (rule tilings), every form's price in one [OPT] algorithm line."""
    def choose(node: Node, g: Graph, built: dict[str, list[OpInstance]]) -> str:
        priced: dict[str, tuple[float, int]] = {}
        refused = []
        for f, ops in built.items():
            try:
                priced[f] = (sum(_cycles(opspec_of(op), profile) for op in ops), len(ops))
            except KilnError:  # no tiling fits (the col2im rows of a very wide map): the form is not offered
                refused.append(f)
        if not priced:
            raise KilnError("tiling", f"node '{node.name}' (ConvTranspose) of {model}", f"no form fits: "
                            f"{', '.join(refused)} refused (its tile does not fit {profile.name}), and stride_phase "
                            f"cannot take this shape (a phase no kernel tap reaches)")
        best = min(priced, key=lambda f: priced[f][0])
        fields: dict = {"refused": ",".join(refused)} if refused else {}
        for f, (c, n) in {**priced, **estimates(node, g, profile, options)}.items():
            fields[f"{f}_cycles"] = round(c)
            fields[f"{f}_launches"] = n
        fields["estimated"] = ",".join(f for f in fields_forms(fields) if f not in priced) or "none"
        log.add("algorithm", f"{model}:{node.name}", f"conv_transpose={best}", "cost_model", **fields)
        return best
    return choose


def fields_forms(fields: dict) -> list[str]:
    return [k[:-len("_cycles")] for k in fields if k.endswith("_cycles")]
