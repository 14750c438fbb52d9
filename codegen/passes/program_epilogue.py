"""Program epilogues: an elementwise program (codegen/passes/eltwise_programs.py) that reads only a depthwise
convolution's or a Resize's output joins that kernel. dwconv2d_vector already holds each output row in fp32 in
UB, so the program's Vector instructions (codegen/ir/eltwise_program.py: SiLU as sigmoid + mul, HardSwish,
LeakyRelu, Tanh...) run there before the cast back to fp16: no launch, no GM round trip of the conv's result
(instruction-level fusion, as its ReLU and Clip epilogues). Runs after the programs are formed (the program is
then known whole: SiLU's Sigmoid and Mul both read the conv), before lowering.

Taken when ENABLE_FUSION=ON, the program reads nothing but the conv's output (and constants folded into its
steps), nothing else reads that output and it is not a graph output, the fused kernel stays within
MAX_FUSION_DEPTH, and the program maps 0 to 0 when the channels do not fill the last C0 block (the padded lanes
must stay zero for the next kernel). Every opportunity is logged; the ones not taken join the fusion audit.

A Cube convolution (dense or grouped, conv2d_cube_img2col / conv2d_grouped_cube) runs the program in its Vector
epilogue (after bias, residual and activation, in fp32, before the one cast to fp16): on a coupled profile (310P)
on each tile L0C -> UB, on a split one (910B) in the Vector-core pass over the conv's output. There the cost model
decides: taken where the fused kernel's predicted cycles (the rule's variant, `rule_cycles` from the family
registry) are fewer than the conv's and the program's own kernel's, both logged; otherwise audited
`program_epilogue_slower`. Without a profile (the runtime's generic "unchained" planning) nothing predicts, and a
Cube conv keeps its program as its own kernel. A chained conv or one with a second source keeps it too
(epilogue_unsupported). ConvTranspose and GEMMs keep their program: fusion.py audits them.

A Resize (resize_vector) holds each fp16 output row in UB before its store: the program runs there the same way,
on the row cast to fp32 and cast back (nearest: once per run of output rows reading one input row), under the same
conditions (a Resize's padded channel lanes are copies of the input's zeros).
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.eltwise_program import depth as program_depth
from ..ir.eltwise_program import encode, evaluate, f32
from ..ir.graph import Graph, Node
from ..ir.opspec import C0, Conv2dSpec, EltwiseProgramSpec, Opspec, c1, is_depthwise
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .fusion import FusionLimits, FusionResult, _index, _label
from .pricing import unpriced

# (spec, profile) -> (predicted cycles of the variant the rule gives it, the first on-chip buffer it overflows or "")
RuleCycles = Callable[[Opspec, Profile], tuple[float, str]]


def _depthwise_conv(n: Node | None, g: Graph) -> bool:
    if n is None or n.op_type != "Conv" or n.fused.chain_first is not None:
        return False
    w = n.inputs[1]
    wshape = g.initializers[w].shape if w in g.initializers else g.values[w].shape
    return is_depthwise(n.attrs.get("group", 1), g.values[n.inputs[0]].shape[1], wshape)


def _cube_conv(n: Node | None, g: Graph) -> bool:
    """A Conv on the Cube (dense, grouped, a chain's 1x1): not depthwise."""
    return n is not None and n.op_type == "Conv" and not _depthwise_conv(n, g)


def _producer(n: Node | None, g: Graph) -> bool:
    """A kernel that takes a program epilogue: a depthwise Conv (dwconv2d_vector), a Resize (resize_vector), a
    Cube Conv (its Vector epilogue)."""
    return _depthwise_conv(n, g) or (n is not None and n.op_type == "Resize") or _cube_conv(n, g)


def cube_conv_spec(conv: Node, g: Graph, program: str = "") -> Conv2dSpec:
    """The Conv2dSpec lowering will give a Cube conv (fp16 operands), with `program` as its epilogue."""
    a, act = conv.attrs, conv.fused.activation
    n, cin, h, w = g.values[conv.inputs[0]].shape
    wname = conv.inputs[1]
    cout, _, kh, kw = g.initializers[wname].shape if wname in g.initializers else g.values[wname].shape
    (pt, pl, pb, pr), (sh, sw), (dh, dw) = a["pads"], a["strides"], a["dilations"]
    clip_hi = f32(conv.fused.clip[1]) if act == "Clip" and conv.fused.clip is not None else 0.0
    return Conv2dSpec(n, cin, h, w, cout, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw,
                      len(conv.inputs) > 2 and conv.inputs[2] != "", act == "Relu", bool(conv.fused.residual), clip_hi,
                      group=a.get("group", 1), program=program)


def _cost_rejection(conv: Node, prog: Node, g: Graph, limits: FusionLimits,
                    rule_cycles: RuleCycles | None) -> tuple[str, str, dict]:
    """The cost model's word on a Cube conv taking `prog`: (reason, detail, cycles facts); reason "" = take it."""
    if conv.fused.second is not None or conv.fused.chain_first is not None:
        what = "accumulates a second source" if conv.fused.second is not None else "is a chain's 1x1 conv"
        return "epilogue_unsupported", f"{conv.name} {what}; that kernel takes no program epilogue", {}
    if len(g.values[conv.inputs[0]].shape) != 4:
        return "epilogue_unsupported", f"{conv.name} is not a 2-D convolution", {}
    if limits.profile is None or rule_cycles is None:
        return "program_epilogue_slower", "no profile to predict on (generic planning): the program's own kernel", {}
    too_large = unpriced(g.values[conv.outputs[0]].shape)
    if too_large:
        return "not_priced", f"{conv.name}'s output: {too_large}", {}
    program = encode(prog.attrs["steps"])
    fused_spec = cube_conv_spec(conv, g, program)
    n, c, ho, wo = g.values[conv.outputs[0]].shape
    plane = ho * wo * C0
    fused, overflow = rule_cycles(fused_spec, limits.profile)
    conv_alone, _ = rule_cycles(cube_conv_spec(conv, g), limits.profile)
    own, _ = rule_cycles(EltwiseProgramSpec(n * c1(c) * plane, plane, c1(c), c % C0, "full", program), limits.profile)
    facts = {"fused_cycles": round(fused), "separate_cycles": round(conv_alone + own), "conv_cycles": round(conv_alone),
             "program_cycles": round(own), "profile": limits.profile.name}
    if overflow:
        return "capacity", f"the epilogue's {overflow} footprint exceeds {limits.profile.name}'s", facts
    if fused >= conv_alone + own:
        return "program_epilogue_slower", (f"{round(fused)} cycles fused >= {round(conv_alone)} conv + {round(own)} "
                                           f"program on {limits.profile.name}"), facts
    return "", "Vector epilogue", facts


def _rejection(conv: Node, prog: Node, g: Graph, limits: FusionLimits, readers: dict[str, set[str]]) -> tuple[str, str]:
    """(reason, detail) why `prog` stays its own kernel after `conv` (a depthwise Conv or a Resize), or
    ("", "Vector pass")."""
    x = conv.outputs[0]
    steps = prog.attrs["steps"]
    fused_depth = 1 + sum(1 for t in conv.fused.op_types if t != "BN") + program_depth(steps)
    if not limits.enable:
        return "fusion_off", "ENABLE_FUSION=OFF"
    if conv.fused.program or (conv.fused.residual and not _cube_conv(conv, g)):
        return "activation_taken", f"{conv.name} already ends with {conv.fused.program or 'a residual add'}"
    if list(prog.inputs) != [x] or tuple(prog.attrs["forms"]) != ("full",):
        return "epilogue_unsupported", (f"the program reads {len(prog.inputs)} tensors; the {conv.op_type} kernel "
                                        f"takes one that reads only {x}")
    if readers.get(x, set()) != {prog.name} or x in {v.name for v in g.outputs}:
        return "multiple_consumers", f"{x} is also read elsewhere"
    if fused_depth > limits.max_depth:
        return "depth_limit", f"depth {fused_depth} > MAX_FUSION_DEPTH={limits.max_depth}"
    channels = g.values[x].shape[1]
    with np.errstate(all="ignore"):
        at_zero = float(evaluate(steps, [np.zeros(1)])[0])
    if channels % C0 and at_zero != 0.0:
        return "epilogue_unsupported", (f"the program maps 0 to {at_zero:g}: the {C0 - channels % C0} padded channel "
                                        f"lanes of {x} ({channels} channels) would not stay zero")
    return "", "Vector pass"


def absorb_program_epilogues(g: Graph, model: str, limits: FusionLimits, log: OptLog, res: FusionResult,
                             rule_cycles: RuleCycles | None = None) -> None:
    """Rewrite `g` (in place): each EltwiseProgram node reading a depthwise Conv's, a Resize's or a Cube Conv's
    output becomes that kernel's epilogue where _rejection (and for a Cube conv, the cost model through
    `rule_cycles`) finds nothing against it; logged and recorded in `res` either way."""
    consumers, producer_of, _ = _index(g)  # fusion's index: a residual operand and a second source read too
    readers = {v: {n.name for n in ns} for v, ns in consumers.items()}
    removed: set[str] = set()
    for prog in g.nodes:
        if prog.op_type != "EltwiseProgram":
            continue
        conv = next((producer_of[i] for i in prog.inputs if _producer(producer_of.get(i), g)), None)
        if conv is None:
            continue
        ops = "+".join(prog.attrs["op_types"])
        pattern, subject = f"{conv.op_type}+{ops}", f"{model}:{prog.name}"
        reason, detail = _rejection(conv, prog, g, limits, readers)
        facts: dict = {}
        if not reason and _cube_conv(conv, g):
            reason, detail, facts = _cost_rejection(conv, prog, g, limits, rule_cycles)
        if reason:
            log.add("fusion", subject, f"{pattern}:rejected", reason, detail=detail, **facts)
            res.audit.append({"node": prog.name, "into": conv.name, "pattern": pattern, "reason": reason,
                              "detail": detail})
            continue
        source = list(prog.source) or [prog.name]
        label = _label(conv, *prog.attrs["op_types"])
        conv.fused.program = encode(prog.attrs["steps"])
        conv.fused.ops.extend(source)
        conv.fused.op_types.extend(prog.attrs["op_types"])
        conv.source = (list(conv.source) or [conv.name]) + source
        conv.outputs = list(prog.outputs)
        producer_of[prog.outputs[0]] = conv
        removed.add(prog.name)
        log.add("fusion", subject, f"Fused({label})", "program_epilogue", into=conv.name, where=detail,
                program=conv.fused.program, ops=len(conv.source), **facts)
        res.fused.append({"node": prog.name, "into": conv.name, "pattern": pattern, "where": detail})
    g.nodes = [n for n in g.nodes if n.name not in removed]
