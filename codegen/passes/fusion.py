"""Fusion: activations join the kernel that produces their input, where the
hardware profile can apply them on the way out.

Epilogues each kernel family can run (the kernels implement them):
  Conv (dense or grouped) and Gemm/MatMul run on the Cube: Fixpipe applies ReLU on the
    way out of L0C. Clip/ReLU6 and GELU are not Fixpipe functions: they would
    need a Vector pass (through UB on coupled profiles, through GM/L2 between
    the separate Cube and Vector cores on ascend910b), which no kernel has yet.
  Depthwise Conv, a standalone BatchNormalization (a per-channel affine on the
    depthwise kernel) and Add run on the Vector unit: ReLU and Clip(0, hi) are
    two more instructions in the same pass over UB (instruction-level fusion).
    A Conv (depthwise; on the Cube where the cost model predicts it faster) takes a
    whole elementwise program (SiLU...) once formed: codegen/passes/program_epilogue.py.
  Conv + Conv(1x1) + Add, both convolutions read only by the add (ResNet's
    downsample block): the 1x1 one becomes a second source of the other, its K
    fractals accumulated into the same L0C, so the add is free and neither
    result goes to GM; a ReLU after it is then a Fixpipe ReLU.
  GEMMs reading the same activation (Q, K, V projections): one GEMM over their
    weights side by side, each result a contiguous slice of its output.
  MatMul(Q, K^T) -> Div/Mul by a scalar -> Softmax(last axis) -> MatMul(., V)
    (attention): with USE_FLASH_ATTENTION=ON and seq_kv <= MAX_SEQ_LEN, one
    flash-attention kernel (online softmax over kv tiles); the score and
    probability matrices never go to GM.
A fusion is taken when ENABLE_FUSION=ON, the producer's output feeds only the
activation (and is not a graph output), and the kernel's source ops stay
within MAX_FUSION_DEPTH (BatchNormalization folded into a Conv's weights is
build-time arithmetic, not a fused op, and is not counted). Every opportunity
is logged, taken or not; the ones not taken form the audit.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir.graph import Fused, Graph, Node
from ..ir.opspec import is_depthwise
from ..ir.optlog import OptLog
from ..ir.profiles import Profile
from .channel_norm import fuse_channel_layernorm
from .mha import audit_gemm_epilogues, packed_attention
from .mha import scalar_factor as _scalar
from .pad_fold import fold_pads

ACTIVATIONS = ("Relu", "Clip", "Gelu")
# elementwise ops that run in a fused elementwise program (codegen/passes/eltwise_programs.py); after a GEMM or
# ConvTranspose they are an epilogue opportunity no kernel takes yet, so they are audited (a Conv: program_epilogue)
PROGRAM_ACTIVATIONS = ("Sigmoid", "HardSigmoid", "HardSwish", "LeakyRelu", "PRelu", "Tanh", "Erf", "Softplus", "Exp",
                       "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Pow")


@dataclass(frozen=True)
class FusionLimits:
    """What fusion may do: the build options it reads (ENABLE_FUSION, MAX_FUSION_DEPTH, USE_FLASH_ATTENTION,
    MAX_SEQ_LEN), the profile whose capacities it checks (None: no size-dependent Conv -> Conv 1x1 chains), and
    attention_capacity(head_dim, profile): why the attention kernel's smallest tile does not fit ("" if it does;
    the kernel family's own footprint, codegen/families/registry.py)."""
    enable: bool
    max_depth: int
    flash_attention: bool = True
    max_seq_len: int = 512
    profile: Profile | None = None
    attention_capacity: Callable[[int, Profile], str] | None = None
    channel_norm_cycles: Callable[..., tuple[float, float]] | None = None  # (spec, profile): channel_norm.py

    @classmethod
    def of(cls, options, profile: Profile | None, attention_capacity=None, channel_norm_cycles=None) -> FusionLimits:
        return cls(options.enable_fusion, options.max_fusion_depth, options.use_flash_attention,
                   options.max_seq_len, profile, attention_capacity, channel_norm_cycles)


@dataclass
class FusionResult:
    graph: Graph
    ops_before: int
    fused: list[dict] = field(default_factory=list)
    audit: list[dict] = field(default_factory=list)  # opportunities not taken, with the reason


@dataclass
class _Pass:
    """One fusion run: the graph, its limits and log, the result so far, and the graph index the residual pass
    keeps up to date as it fuses (readers, producers, graph outputs, node order, fused-away nodes)."""
    g: Graph
    model: str
    limits: FusionLimits
    log: OptLog
    res: FusionResult
    consumers: dict[str, list[Node]] = field(default_factory=dict)
    producer_of: dict[str, Node] = field(default_factory=dict)
    outputs: set[str] = field(default_factory=set)
    order: dict[str, int] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)

    @property
    def enable(self) -> bool:
        return self.limits.enable

    @property
    def max_depth(self) -> int:
        return self.limits.max_depth


def _index(g: Graph) -> tuple[dict[str, list[Node]], dict[str, Node], set[str]]:
    """(value -> the nodes reading it, value -> the node producing it, graph outputs). Readers include what
    earlier fusions made a node read: a residual operand, a second source's input."""
    consumers: dict[str, list[Node]] = {}
    for n in g.nodes:
        second = n.fused.second
        for i in list(n.inputs) + [n.fused.residual] + (list(second.inputs[:1]) if second else []):
            if i:
                consumers.setdefault(i, []).append(n)
    return consumers, {o: n for n in g.nodes for o in n.outputs}, {v.name for v in g.outputs}


def _depth(node: Node) -> int:
    """Source ops a fused kernel has absorbed so far, itself included (a folded BatchNormalization is build-time
    weight arithmetic and does not count)."""
    return 1 + sum(1 for t in node.fused.op_types if t != "BN")


def _label(node: Node, *more: str) -> str:
    """Fused(Conv+BN+...): the node's own op and folded BNs, then what it absorbed, in order."""
    own_bn = len(node.source or [node.name]) - 1 - len(node.fused.ops)
    return "+".join([node.op_type] + ["BN"] * own_bn + list(node.fused.op_types) + list(more))


def _depthwise(conv: Node, g: Graph) -> bool:
    """A depthwise Conv (the Vector unit's kernel); dense and grouped convolutions run on the Cube."""
    group, w = conv.attrs.get("group", 1), conv.inputs[1]
    wshape = g.initializers[w].shape if w in g.initializers else g.values[w].shape
    return group > 1 and is_depthwise(group, g.values[conv.inputs[0]].shape[1], wshape)


def _epilogue_support(producer: Node, act: Node, g: Graph) -> tuple[bool, str, str]:
    """(can the producer's kernel apply `act`, reason code, where it runs)."""
    op = act.op_type
    lo, hi = act.attrs.get("min", float("-inf")), act.attrs.get("max", float("inf"))
    if op == "Clip" and len([i for i in act.inputs if i]) > 1:
        return False, "epilogue_unsupported", "Clip with a bound computed at run time: an elementwise program"
    if producer.op_type in ("Conv", "ConvTranspose"):  # ConvTranspose: each of its phase convolutions applies it
        if _depthwise(producer, g):
            if op == "Relu":
                return True, "epilogue_vector", "Vector pass"
            if op == "Clip" and lo == 0.0 and hi > 0:
                return True, "epilogue_vector", "Vector pass"
            return False, "epilogue_unsupported", f"{op} with min {lo} in the depthwise Vector pass"
        if op == "Relu" and not producer.fused.residual:
            return True, "epilogue_fixpipe", "Fixpipe"
        if op == "Relu" or (op == "Clip" and lo == 0.0 and hi > 0):  # after the residual add, or a clip
            return True, "epilogue_vector_core", "Vector-core pass after the Cube"
        return False, "fixpipe_no_" + op.lower(), "Fixpipe"
    if producer.op_type in ("Gemm", "MatMul"):
        if producer.op_type == "MatMul" and producer.inputs[1] not in g.initializers:
            return False, "epilogue_unsupported", "batched MatMul has no epilogue"
        if op == "Relu":
            return True, "epilogue_fixpipe", "Fixpipe"
        return False, "fixpipe_no_" + op.lower(), "Fixpipe"
    if producer.op_type == "BatchNormalization":
        return _batchnorm_epilogue(producer, act, g)
    if producer.op_type == "Add":
        ins = [i for i in producer.inputs if i]
        two_tensors = (len(ins) == 2 and not any(i in g.initializers for i in ins)
                       and g.values[ins[0]].shape == g.values[ins[1]].shape)
        if not two_tensors:  # a bias or scalar add: lowering folds it elsewhere, with no epilogue
            return False, "epilogue_unsupported", "Add with a constant operand"
        if op in ("Relu", "Clip"):
            return True, "vector_chain", "Vector pass"
        return False, "epilogue_unsupported", f"{op} after Add"
    return False, "no_epilogue", f"{producer.op_type} kernels take no epilogue"


def _batchnorm_epilogue(bn: Node, act: Node, g: Graph) -> tuple[bool, str, str]:
    """A standalone BatchNormalization (one no Conv absorbed) is a per-channel affine on the depthwise Vector
    kernel (4-D, or 2-D with whole C0 blocks of channels), which applies ReLU and Clip(0, hi) in the same pass
    over UB; on other 2-D inputs it is a GEMM with diag(scale), whose Fixpipe applies ReLU."""
    op = act.op_type
    lo, hi = act.attrs.get("min", float("-inf")), act.attrs.get("max", float("inf"))
    shape = g.values[bn.inputs[0]].shape
    vector = len(shape) == 4 or (len(shape) == 2 and shape[1] % 16 == 0)
    if vector and (op == "Relu" or (op == "Clip" and lo == 0.0 and hi > 0)):
        return True, "epilogue_vector", "Vector pass"
    if len(shape) == 2 and not vector and op == "Relu":
        return True, "epilogue_fixpipe", "Fixpipe"
    return False, "epilogue_unsupported", f"{op} (min {lo}) after a standalone BatchNormalization of {list(shape)}"


def fuse(g: Graph, model: str, limits: FusionLimits, log: OptLog) -> FusionResult:
    """Every fusion pass over `g` (rewritten in place), in order: attention, activations and residual adds,
    sibling GEMMs, Conv -> Conv 1x1 chains (with a profile)."""
    res = FusionResult(g, ops_before=len(g.nodes))
    res.audit += fold_pads(g, model, log)  # exact and the only way a Pad runs: taken whatever ENABLE_FUSION says
    fuse_channel_layernorm(g, model, limits, log, res.audit, res.fused, limits.channel_norm_cycles)
    fused, audit = packed_attention(g, model, limits.enable, log)  # nn.MultiheadAttention's export (mha.py)
    res.fused += fused
    res.audit += audit
    _fuse_attention(_Pass(g, model, limits, log, res))
    ps = _Pass(g, model, limits, log, res, *_index(g), {n.name: i for i, n in enumerate(g.nodes)})
    _fuse_activations(ps)
    _fuse_siblings(_Pass(g, model, limits, log, res))
    if limits.profile is not None:
        _fuse_chains(_Pass(g, model, limits, log, res), limits.profile)
    res.audit += audit_gemm_epilogues(g, model, limits.enable, log)  # residual Add, Erf GELU after a GEMM (mha.py)
    return res


def _fuse_activations(ps: _Pass) -> None:
    """An activation joins the kernel producing its input where that kernel can apply it (_epilogue_support);
    a residual Add joins a convolution (_fuse_residual)."""
    g, model, enable, max_depth, log, res = ps.g, ps.model, ps.enable, ps.max_depth, ps.log, ps.res
    consumers, producer_of, outputs, removed = ps.consumers, ps.producer_of, ps.outputs, ps.removed
    for act in g.nodes:
        if act.op_type == "Add":
            _fuse_residual(act, ps)
            continue
        if act.op_type in PROGRAM_ACTIVATIONS and act.inputs and act.inputs[0] in producer_of:
            _audit_program_epilogue(act, producer_of[act.inputs[0]], ps)
            continue
        if act.op_type not in ACTIVATIONS or not act.inputs or act.inputs[0] not in producer_of:
            continue
        prod = producer_of[act.inputs[0]]
        if prod.op_type in ACTIVATIONS or prod.name in removed:
            continue
        pattern = f"{prod.op_type}+{act.op_type}"
        ok, reason, where = _epilogue_support(prod, act, g)
        depth = _depth(prod) + 1  # the producer, what it absorbed, and this activation
        subject = f"{model}:{act.name}"
        if not enable:
            ok, reason, where = False, "fusion_off", "ENABLE_FUSION=OFF"
        elif ok and prod.fused.activation:
            ok, reason, where = False, "activation_taken", f"{prod.name} already ends with {prod.fused.activation}"
        elif ok and (len(consumers.get(prod.outputs[0], [])) != 1 or prod.outputs[0] in outputs):
            ok, reason, where = False, "multiple_consumers", f"{prod.outputs[0]} is also read elsewhere"
        elif ok and depth > max_depth:
            ok, reason, where = False, "depth_limit", f"depth {depth} > MAX_FUSION_DEPTH={max_depth}"
        if not ok:
            log.add("fusion", subject, f"{pattern}:rejected", reason, detail=where)
            res.audit.append({"node": act.name, "into": prod.name, "pattern": pattern, "reason": reason,
                              "detail": where})
            continue
        label = _label(prod, act.op_type)
        prod.fused.activation = act.op_type
        if act.op_type == "Clip":
            prod.fused.clip = (act.attrs.get("min", float("-inf")), act.attrs.get("max", float("inf")))
        prod.fused.ops.append(act.name)
        prod.fused.op_types.append(act.op_type)
        prod.source = (list(prod.source) or [prod.name]) + [act.name]
        prod.outputs = list(act.outputs)
        producer_of[act.outputs[0]] = prod
        removed.add(act.name)
        log.add("fusion", subject, f"Fused({label})", reason, into=prod.name, where=where,
                ops=len(prod.source))
        res.fused.append({"node": act.name, "into": prod.name, "pattern": pattern, "where": where})
    g.nodes = [n for n in g.nodes if n.name not in removed]


def _audit_program_epilogue(act: Node, prod: Node, ps: _Pass) -> None:
    """An elementwise-program op reading a Conv's or GEMM's output: its own Vector kernel (the program pass
    chains it with the elementwise ops after it), one GM round trip the audit names."""
    if prod.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul") or prod.name in ps.removed:
        return
    if prod.op_type == "Conv":  # decided once the program is formed (program_epilogue.py: the cost model for Cube's)
        return
    pattern, reason = f"{prod.op_type}+{act.op_type}", "no_program_epilogue"
    detail = f"{act.op_type} after {prod.name}: its own Vector kernel (Cube epilogues: Fixpipe ReLU, Vector ReLU/Clip)"
    if not ps.enable:
        reason, detail = "fusion_off", "ENABLE_FUSION=OFF"
    ps.log.add("fusion", f"{ps.model}:{act.name}", f"{pattern}:rejected", reason, detail=detail)
    ps.res.audit.append({"node": act.name, "into": prod.name, "pattern": pattern, "reason": reason, "detail": detail})


def _sibling_gemm(n: Node, g: Graph) -> bool:
    """A GEMM with a constant 2-D weight (MatMul, or Gemm without transA/alpha/beta): one of a sibling group."""
    if n.op_type == "MatMul":
        return len(n.inputs) == 2 and n.inputs[1] in g.initializers and g.initializers[n.inputs[1]].ndim == 2
    return (n.op_type == "Gemm" and not n.attrs.get("transA", 0) and n.attrs.get("alpha", 1.0) == 1.0
            and n.attrs.get("beta", 1.0) == 1.0 and n.inputs[1] in g.initializers)


def _audit_sibling_convs(g: Graph, model: str, log: OptLog, res: FusionResult) -> None:
    """Convolutions reading the same activation (ResNet's downsample 1x1 and the block's first 1x1) are audited,
    not fused: where the downsample already accumulates into the block's last conv (second source) that is the
    better home for it (no Add, no stored result), and otherwise no conv kernel writes two results yet."""
    readers: dict[str, list[tuple[Node, Node | None]]] = {}  # activation -> (conv, the host it was fused into)
    for n in g.nodes:
        if n.op_type == "Conv" and n.inputs:
            readers.setdefault(n.inputs[0], []).append((n, None))
        second = n.fused.second
        if second is not None:
            readers.setdefault(second.inputs[0], []).append((second, n))
    for x, convs in readers.items():
        if len(convs) < 2 or x in g.initializers:
            continue
        names = [c.name for c, _ in convs]
        # a conv already in a two-source kernel (as its host or as the accumulated 1x1): that kernel keeps its
        # result and the Add off GM, which a sibling kernel would not
        taken = [(h, c) for c, h in convs if h is not None] + [(c, c.fused.second) for c, h in convs
                                                               if h is None and c.fused.second is not None]
        if taken:
            host, second = taken[0]
            reason, detail = "sibling_taken", (f"{second.name} accumulates into {host.name}'s L0C with the Add "
                                               f"(second_source_l0c)")
        else:
            reason, detail = "sibling_conv_unsupported", "no conv kernel writes the results of two convolutions yet"
        log.add("fusion", f"{model}:{names[0]}", "Conv+Conv:rejected", reason, siblings=",".join(names), input=x,
                detail=detail)
        res.audit.append({"node": ",".join(names[1:]), "into": names[0], "pattern": "Conv+Conv", "reason": reason,
                          "detail": detail})


def _fuse_siblings(ps: _Pass) -> None:
    """GEMMs that read the same activation (a transformer's Q, K and V projections) become one GEMM over their
    weights side by side: the input is read once and one launch replaces several. Each result is written as a
    contiguous slice of the one output (GemmSpec.split), so its readers see the tensor they read before."""
    g, model, enable, max_depth, log, res = ps.g, ps.model, ps.enable, ps.max_depth, ps.log, ps.res
    consumers, _, outputs = _index(g)
    groups: dict[str, list[Node]] = {}
    for n in g.nodes:
        if _sibling_gemm(n, g) and n.inputs[0] not in g.initializers:
            groups.setdefault(n.inputs[0], []).append(n)
    _audit_sibling_convs(g, model, log, res)
    removed: set[str] = set()
    for x, members in groups.items():
        if len(members) < 2:
            continue
        names = [m.name for m in members]
        subject, pattern = f"{model}:{members[0].name}", "+".join(m.op_type for m in members)

        def n_out(m: Node) -> int:
            w = g.initializers[m.inputs[1]]
            return int(w.shape[0] if m.op_type == "Gemm" and m.attrs.get("transB", 0) else w.shape[1])
        widths = sorted({n_out(m) for m in members})
        acts = {(m.fused.activation, m.fused.clip) for m in members}
        final = []  # what each member's readers read: its output, or that of the Add of a constant row after it
        for m in members:
            cs = consumers.get(m.outputs[0], [])
            bias_add = (len(cs) == 1 and cs[0].op_type == "Add" and not m.fused.activation
                        and any(i in g.initializers for i in cs[0].inputs))
            final += [m.outputs[0]] + ([cs[0].outputs[0]] if bias_add else [])
        depth = sum(_depth(m) for m in members)
        if not enable:
            reason, detail = "fusion_off", "ENABLE_FUSION=OFF"
        elif len(widths) > 1 or widths[0] % 16:
            reason, detail = "sibling_shapes", (f"outputs of {'/'.join(map(str, widths))} columns: the results must "
                                                f"be equally wide and a multiple of 16 to be slices of one output")
        elif len(acts) > 1:
            reason, detail = "sibling_shapes", "different epilogues (activation) after the GEMMs"
        elif any(v in outputs for v in final):
            reason, detail = "graph_output", "a result is a graph output, which cannot be a slice of another tensor"
        elif depth > max_depth:
            reason, detail = "depth_limit", f"depth {depth} > MAX_FUSION_DEPTH={max_depth}"
        else:
            reason, detail = "siblings_one_gemm", f"{len(members)} GEMMs of {x} in one, N {widths[0]} each"
        if reason != "siblings_one_gemm":
            log.add("fusion", subject, f"{pattern}:rejected", reason, siblings=",".join(names), detail=detail)
            res.audit.append({"node": ",".join(names[1:]), "into": names[0], "pattern": pattern, "reason": reason,
                              "detail": detail})
            continue
        lead = members[0]
        lead.fused.siblings = members[1:]
        for m in members[1:]:
            lead.fused.ops.append(m.name)
            lead.fused.op_types.append(m.op_type)
            lead.source = (list(lead.source) or [lead.name]) + (list(m.source) or [m.name])
            removed.add(m.name)
        log.add("fusion", subject, f"Fused({pattern})", reason, into=lead.name, siblings=",".join(names),
                n=widths[0], ops=len(lead.source))
        res.fused.append({"node": ",".join(names[1:]), "into": lead.name, "pattern": pattern, "where": detail})
    g.nodes = [n for n in g.nodes if n.name not in removed]


def _chain_problem(first: Node, second: Node, g: Graph) -> str | None:
    """Why `second` (reading only `first`'s output) cannot take `first` as its chained window conv, or None."""
    if first.op_type != "Conv" or second.op_type != "Conv":
        return "not two convolutions"
    if first.attrs.get("group", 1) != 1 or second.attrs.get("group", 1) != 1:
        return "grouped convolution"
    if first.fused.activation not in ("", "Relu"):
        return f"the first conv ends with {first.fused.activation}, not a Fixpipe ReLU"
    if first.fused.residual or first.fused.second or second.fused.second:
        return "a residual or a second source"
    if _second_source_problem(second, g) not in (None, "already has a fused epilogue") \
            or set(second.attrs.get("strides", (1, 1))) != {1}:
        return "the second conv is not a stride-1 unpadded 1x1"
    return None


def _fuse_chains(ps: _Pass, profile: Profile) -> None:
    """Conv(+ReLU) -> Conv 1x1: when a window conv's result is read only by a 1x1 conv, one kernel computes an
    M tile of it for all its channels into L0C, Fixpipe rounds it (ReLU on the way) into L1, and the 1x1 conv
    reads it from there: the intermediate never goes to GM. The tile is then all output channels of both convs
    for 16..256 pixels, so an M tile is one block: a map with fewer 16-pixel tiles than the profile has Cube
    cores would leave cores idle, and stays two kernels."""
    g, model, enable, max_depth, log, res = ps.g, ps.model, ps.enable, ps.max_depth, ps.log, ps.res
    consumers, producer_of, outputs = _index(g)
    cores = profile.cores_for("cube")
    removed: set[str] = set()
    for second in g.nodes:
        if second.op_type != "Conv" or not second.inputs or second.inputs[0] not in producer_of:
            continue
        first = producer_of[second.inputs[0]]
        if first.op_type != "Conv" or first.name in removed:
            continue
        subject, pattern = f"{model}:{second.name}", "Conv+Conv1x1"
        problem = _chain_problem(first, second, g)
        if problem is not None:
            # A conv -> 1x1 conv pair that only lacks kernel support is an opportunity not taken, so it is
            # audited: MobileNet's depthwise -> pointwise, or a first conv ending in a clip (no Fixpipe clip).
            depthwise = _depthwise(first, g)
            plain_first = Node(first.name, "Conv", [], [])
            grouped = problem == "grouped convolution"  # ResNeXt's grouped 3x3 -> 1x1: no chain kernel takes groups
            if _chain_problem(plain_first, second, g) is None and (depthwise or grouped or "ends with" in problem):
                kind = "DwConv+Conv1x1" if depthwise else pattern
                where = ("they run on separate cores that meet only through GM" if not profile.coupled else
                         "they share a core, but the core has no UB -> L1 move")
                detail = (f"{first.name} is depthwise (Vector unit, result in UB) and {second.name} pointwise "
                          f"(Cube, operands from L1): on {profile.name} {where}, so the intermediate goes "
                          f"through GM in any kernel" if depthwise else
                          f"{first.name} is a grouped convolution; the chained kernel takes dense window convs only"
                          if grouped else problem + "; no kernel chains them")
                log.add("fusion", subject, f"{kind}:rejected", "chain_unsupported", detail=detail)
                res.audit.append({"node": second.name, "into": first.name, "pattern": kind,
                                  "reason": "chain_unsupported", "detail": detail})
            continue  # otherwise not this pattern: nothing to audit
        ho, wo = g.values[second.inputs[0]].shape[2:4]
        tiles = -(-ho * wo // 16)
        depth = _depth(first) + _depth(second)
        mid = g.values[second.inputs[0]].shape[1]
        if not enable:
            reason, detail = "fusion_off", "ENABLE_FUSION=OFF"
        elif len(consumers.get(first.outputs[0], [])) != 1 or first.outputs[0] in outputs:
            reason, detail = "multiple_consumers", f"{first.outputs[0]} is also read elsewhere"
        elif depth > max_depth:
            reason, detail = "depth_limit", f"depth {depth} > MAX_FUSION_DEPTH={max_depth}"
        elif 16 * mid * 4 > profile.capacity["L0C"] // 2 or -(-mid // 16) * 64 > profile.capacity["BT"]:
            reason, detail = "capacity", (f"{mid} intermediate channels: a 16-pixel fp32 tile over half of L0C "
                                          f"or their bias over BT")
        elif tiles < cores:
            reason, detail = "chain_idle_cores", f"{ho}x{wo} map has {tiles} 16-pixel tiles < {cores} Cube cores"
        else:
            reason, detail = "chain_l1", f"{first.name}'s output stays in L1 for {second.name}"
        if reason != "chain_l1":
            log.add("fusion", subject, f"{pattern}:rejected", reason, detail=detail)
            res.audit.append({"node": second.name, "into": first.name, "pattern": pattern, "reason": reason,
                              "detail": detail})
            continue
        label = _label(first) + "+" + _label(second)
        second.fused.chain_first = first
        second.source = (list(first.source) or [first.name]) + (list(second.source) or [second.name])
        removed.add(first.name)
        log.add("fusion", subject, f"Fused({label})", reason, into=second.name, first=first.name,
                ops=len(second.source))
        res.fused.append({"node": first.name, "into": second.name, "pattern": pattern, "where": detail})
    g.nodes = [n for n in g.nodes if n.name not in removed]


def _fuse_residual(add: Node, ps: _Pass) -> None:
    """Conv(+BN) + Add(residual): the add joins the later of the two producing convolutions, whose kernel
    then ends with a Vector-core pass y = conv + residual (the other input exists by then)."""
    g, model, enable, max_depth, log, res = ps.g, ps.model, ps.enable, ps.max_depth, ps.log, ps.res
    consumers, producer_of, outputs, order, removed = ps.consumers, ps.producer_of, ps.outputs, ps.order, ps.removed
    ins = [i for i in add.inputs if i]
    if len(ins) != 2 or any(i in g.initializers for i in ins) or ins[0] == ins[1]:
        return
    if g.values[ins[0]].shape != g.values[ins[1]].shape:
        return

    def ready_before(value: str, node: Node) -> bool:  # a graph input, or computed before `node`
        p = producer_of.get(value)
        return p is None or order[p.name] < order[node.name]

    if _fuse_second_source(add, ins, ps):
        return
    # the conv that takes the add: the latest one whose other operand already exists when it runs
    convs = [(producer_of[i], ins[1 - k]) for k, i in enumerate(ins) if i in producer_of
             and producer_of[i].op_type == "Conv" and not _depthwise(producer_of[i], g)
             and producer_of[i].name not in removed]
    convs = [(p, other) for p, other in convs if ready_before(other, p)]
    if not convs:
        if any(i in producer_of and producer_of[i].op_type == "Conv" for i in ins):
            log.add("fusion", f"{model}:{add.name}", "Conv+Add:rejected", "operand_order",
                    detail="the other operand is computed after the convolution")
            res.audit.append({"node": add.name, "into": "", "pattern": "Conv+Add", "reason": "operand_order",
                              "detail": "the other operand is computed after the convolution"})
        return
    prod, other = max(convs, key=lambda pc: order[pc[0].name])
    pattern, subject = "Conv+Add", f"{model}:{add.name}"
    depth = _depth(prod) + 1
    if not enable:
        reason, detail = "fusion_off", "ENABLE_FUSION=OFF"
    elif prod.fused.activation:
        reason, detail = "activation_taken", f"{prod.name} already ends with {prod.fused.activation}"
    elif prod.fused.residual:
        reason, detail = "residual_taken", f"{prod.name} already adds {prod.fused.residual}"
    elif len(consumers.get(prod.outputs[0], [])) != 1 or prod.outputs[0] in outputs:
        reason, detail = "multiple_consumers", f"{prod.outputs[0]} is also read elsewhere"
    elif depth > max_depth:
        reason, detail = "depth_limit", f"depth {depth} > MAX_FUSION_DEPTH={max_depth}"
    else:
        reason, detail = "epilogue_vector_core", "Vector-core pass after the Cube"
    if reason != "epilogue_vector_core":
        log.add("fusion", subject, f"{pattern}:rejected", reason, detail=detail)
        res.audit.append({"node": add.name, "into": prod.name, "pattern": pattern, "reason": reason, "detail": detail})
        return
    before = list(prod.source) or [prod.name]
    label = _label(prod, "Add")
    prod.fused.residual = other
    prod.fused.ops.append(add.name)
    prod.fused.op_types.append("Add")
    prod.source = before + [add.name]
    prod.outputs = list(add.outputs)
    producer_of[add.outputs[0]] = prod
    removed.add(add.name)
    log.add("fusion", subject, f"Fused({label})", reason, into=prod.name, where=detail,
            ops=len(prod.source))
    res.fused.append({"node": add.name, "into": prod.name, "pattern": pattern, "where": detail})


def _second_source_problem(conv: Node, g: Graph) -> str | None:
    """Why `conv` cannot be accumulated into another conv's L0C as its second source, or None: it must be a
    plain 1x1 convolution (no padding, dilation or groups, a square stride) with nothing fused after it."""
    kshape = g.values[conv.inputs[1]].shape if conv.inputs[1] in g.values else ()
    if conv.op_type != "Conv" or len(kshape) != 4 or tuple(kshape[2:]) != (1, 1):
        return "not a 1x1 convolution"
    a = conv.attrs
    if a.get("group", 1) != 1 or any(a.get("pads", (0,))) or set(a.get("dilations", (1, 1))) != {1}:
        return "padded, dilated or grouped"
    if len(set(a.get("strides", (1, 1)))) != 1:
        return f"stride {a.get('strides')} is not square"
    f = conv.fused
    if f.activation or f.residual or f.second or f.ops:
        return "already has a fused epilogue"
    return None


def _fuse_second_source(add: Node, ins: list[str], ps: _Pass) -> bool:
    """Conv + Conv(1x1) + Add: when both operands of the add are convolutions read only by it, the 1x1 one
    (ResNet's downsample) becomes a second source of the other: its K fractals are accumulated into the same
    L0C, so neither result goes to GM and the add costs nothing. Returns whether it fused."""
    g, model, enable, max_depth, log, res = ps.g, ps.model, ps.enable, ps.max_depth, ps.log, ps.res
    consumers, producer_of, outputs, order, removed = ps.consumers, ps.producer_of, ps.outputs, ps.order, ps.removed
    found = [producer_of.get(i) for i in ins]
    prods = [p for p in found if p is not None and p.op_type == "Conv" and p.name not in removed]
    if len(prods) != len(found):
        return False
    if any(len(consumers.get(p.outputs[0], [])) != 1 or p.outputs[0] in outputs for p in prods):
        return False  # a result someone else reads must reach GM: the residual route handles it
    a, b = prods
    # host: the later conv; the second source's input must exist when the host runs
    options = []
    for host, second in ((a, b), (b, a)):
        problem = _second_source_problem(second, g)
        if host.attrs.get("group", 1) != 1 or host.fused.activation or host.fused.residual or host.fused.second:
            problem = problem or f"{host.name} already has a fused epilogue"
        p_in = producer_of.get(second.inputs[0])
        if p_in is not None and order[p_in.name] > order[host.name]:
            problem = problem or f"{second.inputs[0]} is computed after {host.name}"
        options.append((problem, order[host.name], host, second))
    legal = [o for o in options if o[0] is None]
    subject, pattern = f"{model}:{add.name}", "Conv+Conv+Add"
    if not legal:  # not an opportunity of this kind: the residual route below decides (and logs) the add
        return False
    _, _, host, second = max(legal, key=lambda o: o[1])
    depth = _depth(host) + 2  # the host, the second conv and the add
    if not enable:
        reason, detail = "fusion_off", "ENABLE_FUSION=OFF"
    elif depth > max_depth:
        reason, detail = "depth_limit", f"depth {depth} > MAX_FUSION_DEPTH={max_depth}"
    else:
        reason, detail = "second_source_l0c", f"{second.name} accumulated into {host.name}'s L0C"
    if reason != "second_source_l0c":
        log.add("fusion", subject, f"{pattern}:rejected", reason, detail=detail)
        res.audit.append({"node": add.name, "into": host.name, "pattern": pattern, "reason": reason, "detail": detail})
        return False
    second_ops = list(second.source) or [second.name]
    label = _label(host, "Conv", *["BN"] * (len(second_ops) - 1), "Add")
    host.fused.second = second
    host.fused.ops.extend(second_ops + [add.name])
    host.fused.op_types.extend(["Conv"] + ["BN"] * (len(second_ops) - 1) + ["Add"])
    host.source = (list(host.source) or [host.name]) + second_ops + [add.name]
    host.outputs = list(add.outputs)
    producer_of[add.outputs[0]] = host
    removed.update({second.name, add.name})
    log.add("fusion", subject, f"Fused({label})", reason, into=host.name, second=second.name,
            ops=len(host.source))
    res.fused.append({"node": add.name, "into": host.name, "pattern": pattern, "where": detail})
    return True


# ---------------------------------------------------------------- attention (flash)

def _k_operand(g: Graph, kt: str, producer_of: dict[str, Node],
               consumers: dict[str, list[Node]]) -> tuple[str, Node | None] | None:
    """How K reaches the kernel as [batch, heads, kv, d], given the MatMul's B operand K^T [batch, heads, d, kv]:
    (value, absorbed Transpose or None), or None if neither form below. Exporters write K^T as a Transpose of the
    heads-split K [.., kv, d] (perm 0,1,3,2: the kernel reads that K directly and the Transpose is absorbed) or as
    one Transpose of the projected [batch, kv, heads, d] (perm 0,2,3,1: lowering stores it as K, the transposed-B
    operand it already makes for batched MatMul)."""
    t = producer_of.get(kt)
    if t is None or t.op_type != "Transpose" or len(consumers.get(kt, [])) != 1:
        return None
    perm = tuple(t.attrs.get("perm", ()))
    if perm == (0, 1, 3, 2):
        return t.inputs[0], t
    if len(perm) == 4 and perm[:2] + (perm[3], perm[2]) == (0, 2, 1, 3):
        return kt, None
    return None


@dataclass
class _AttentionMatch:
    """One MatMul -> scale -> [mask Add] -> Softmax -> MatMul chain and the shapes the kernel needs."""
    qk: Node
    scaled: tuple[str, float]
    mask: Node | None
    softmax: Node
    pv: Node
    chain: list[Node]
    shapes: tuple[tuple, tuple, tuple]  # Q, K^T, V
    dims: tuple[int, int, int, int, int]  # batch, heads, seq_q, head_dim, seq_kv (0 where not rank 4)
    mask_value: str | None
    mask_shape: tuple[int, ...]
    k_operand: tuple[str, Node | None] | None


def _fuse_attention(ps: _Pass) -> None:
    """MatMul(Q, K^T) -> Div or Mul by a scalar -> [Add(mask)] -> Softmax(last axis) -> MatMul(., V) becomes one
    Attention node (lowered to the attention_flash kernel): per (batch, head, q tile) the Cube computes S = Q.K^T
    per kv tile, the Vector unit keeps the running max and sum and rescales the output, the Cube adds P.V. The
    score and probability matrices never reach GM (on split profiles only a tile's worth of workspace does)."""
    g = ps.g
    ps.consumers, ps.producer_of, ps.outputs = _index(g)
    for qk in list(g.nodes):
        if qk.op_type != "MatMul" or len(qk.inputs) < 2 or qk.inputs[1] in g.initializers or qk.name in ps.removed:
            continue
        m = _match_attention(ps, qk)
        if m is None:
            continue
        _, _, sq, d, skv = m.dims
        ops = "+".join(n.op_type for n in m.chain)
        subject, pattern = f"{ps.model}:{m.pv.name}", "Attention"
        reason, detail = _attention_rejection(ps, m)
        if reason:
            ps.log.add("fusion", subject, f"{pattern}:rejected", reason, detail=detail, ops=ops, seq_q=sq,
                       seq_kv=skv, head_dim=d)
            ps.res.audit.append({"node": m.pv.name, "into": qk.name, "pattern": pattern, "reason": reason,
                                 "detail": detail})
            continue
        _rewrite_attention(ps, m, subject)
    g.nodes = [n for n in g.nodes if n.name not in ps.removed]


def _only_consumer(ps: _Pass, value: str) -> Node | None:
    cs = ps.consumers.get(value, [])
    return cs[0] if len(cs) == 1 and value not in ps.outputs else None


def _match_attention(ps: _Pass, qk: Node) -> _AttentionMatch | None:
    """The attention chain that starts at `qk`, or None when the graph holds no such chain there."""
    g = ps.g
    scale_node = _only_consumer(ps, qk.outputs[0])
    scaled = _scalar(g, scale_node) if scale_node is not None else None
    if scale_node is None or scaled is None or scaled[0] != qk.outputs[0]:
        return None
    chain, nxt = [qk, scale_node], _only_consumer(ps, scale_node.outputs[0])
    mask = None
    if nxt is not None and nxt.op_type == "Add":
        mask, chain, nxt = nxt, chain + [nxt], _only_consumer(ps, nxt.outputs[0])
    if nxt is None or nxt.op_type != "Softmax":
        return None
    softmax = nxt
    pv = _only_consumer(ps, softmax.outputs[0])
    if pv is None or pv.op_type != "MatMul" or pv.inputs[0] != softmax.outputs[0]:
        return None
    chain += [softmax, pv]
    q_shape, kt_shape = g.values[qk.inputs[0]].shape, g.values[qk.inputs[1]].shape
    v_shape = g.values[pv.inputs[1]].shape
    rank4 = len(q_shape) == 4 and len(kt_shape) == 4 and len(v_shape) == 4
    (b, h, sq, d), (_, _, _, skv) = (q_shape, kt_shape) if rank4 else ((0, 0, 0, 0), (0, 0, 0, 0))
    mask_value, mask_shape = None, tuple[int, ...]()
    if mask is not None and rank4:  # an additive mask per batch and key position (a padding mask)
        other = [i for i in mask.inputs if i and i != scale_node.outputs[0]]
        mask_shape = tuple(g.values[other[0]].shape) if len(other) == 1 and other[0] in g.values else ()
        if mask_shape == (b, 1, 1, skv):
            mask_value = other[0]
    return _AttentionMatch(qk, scaled, mask, softmax, pv, chain, (tuple(q_shape), tuple(kt_shape), tuple(v_shape)),
                           (b, h, sq, d, skv), mask_value, mask_shape,
                           _k_operand(g, qk.inputs[1], ps.producer_of, ps.consumers))


def _attention_rejection(ps: _Pass, m: _AttentionMatch) -> tuple[str, str]:
    """(reason, detail) why the chain stays unfused, or ("", "")."""
    g, limits = ps.g, ps.limits
    (q_shape, kt_shape, v_shape), (b, h, _, d, skv) = m.shapes, m.dims
    rank4 = len(q_shape) == 4 and len(kt_shape) == 4 and len(v_shape) == 4
    depth = sum(_depth(n) for n in m.chain)  # the compute ops; an absorbed layout Transpose of K is not counted
    if m.softmax.attrs.get("axis", -1) not in (-1, len(g.values[m.softmax.inputs[0]].shape) - 1):
        return "attention_unsupported", f"Softmax over axis {m.softmax.attrs.get('axis')}, not the last"
    if not rank4 or tuple(kt_shape[:3]) != (b, h, d) or tuple(v_shape) != (b, h, skv, d):
        return "attention_unsupported", (f"shapes Q {list(q_shape)}, K^T {list(kt_shape)}, V {list(v_shape)} are "
                                         f"not [b,h,q,d], [b,h,d,kv], [b,h,kv,d]")
    if m.mask is not None and m.mask_value is None:
        return "attention_unsupported", (f"{m.mask.name} adds a mask of shape {list(m.mask_shape)}; the kernel "
                                         f"takes one per batch and key, [{b}, 1, 1, {skv}]")
    if m.k_operand is None:
        return "attention_unsupported", (f"K^T {m.qk.inputs[1]} is not a Transpose (perm 0,1,3,2 or 0,2,3,1) read "
                                         f"only by {m.qk.name}")
    if not limits.enable:
        return "fusion_off", "ENABLE_FUSION=OFF"
    if not limits.flash_attention:
        return "option_off", "USE_FLASH_ATTENTION=OFF"
    if skv > limits.max_seq_len:
        return "seq_exceeds_max_seq_len", f"seq_kv {skv} > MAX_SEQ_LEN={limits.max_seq_len}"
    if depth > limits.max_depth:
        return "depth_limit", f"depth {depth} > MAX_FUSION_DEPTH={limits.max_depth}"
    if limits.profile is not None and limits.attention_capacity is not None:
        problem = limits.attention_capacity(d, limits.profile)  # the footprint of the smallest tile
        if problem:
            return "capacity", problem
    return "", ""


def _rewrite_attention(ps: _Pass, m: _AttentionMatch, subject: str) -> None:
    """Replaces the chain (and an absorbed K Transpose) by one Attention node at the P.V MatMul's place."""
    g, profile = ps.g, ps.limits.profile
    b, h, sq, d, skv = m.dims
    assert m.k_operand is not None  # without one the checks gave a reason
    k_value, k_transpose = m.k_operand
    absorbed = ([k_transpose] if k_transpose is not None else []) + m.chain
    source = [n for a in absorbed for n in (a.source or [a.name])]
    node = Node(m.pv.name, "Attention",
                [m.qk.inputs[0], k_value, m.pv.inputs[1]] + ([m.mask_value] if m.mask_value else []),
                list(m.pv.outputs),
                {"scale": m.scaled[1], "k_layout": "bhkd" if k_transpose is not None else "bt"}, source,
                Fused(op_types=[a.op_type for a in absorbed[1:]]))
    at = next(i for i, n in enumerate(g.nodes) if n is m.pv)
    g.nodes[at] = node
    ps.removed.update(a.name for a in absorbed if a is not m.pv)
    where = "Cube S=Q.K^T and P.V, Vector online softmax; " + (
        "S/P tiles through a per-core GM workspace (split Cube/Vector cores)"
        if profile is not None and not profile.coupled else "S/P tiles on chip (L0C -> UB)")
    ps.log.add("fusion", subject, f"Fused({'+'.join(_label(a) for a in absorbed)})", "flash_attention",
               into=m.pv.name, where=where, ops=len(source), seq_q=sq, seq_kv=skv, heads=h, head_dim=d,
               scale=m.scaled[1], score_matrix_bytes=b * h * sq * skv * 2)
    ps.res.fused.append({"node": m.qk.name, "into": m.pv.name, "pattern": "Attention", "where": where})
