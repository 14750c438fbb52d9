"""Fusion: activations join the kernel that produces their input, where the
hardware profile can apply them on the way out.

Epilogues each kernel family can run (the kernels implement them):
  Conv (groups 1) and Gemm/MatMul run on the Cube: Fixpipe applies ReLU on the
    way out of L0C. Clip/ReLU6 and GELU are not Fixpipe functions: they would
    need a Vector pass (through UB on coupled profiles, through GM/L2 between
    the separate Cube and Vector cores on ascend910b), which no kernel has yet.
  Depthwise Conv and Add run on the Vector unit: ReLU and Clip(0, hi) are two
    more instructions in the same pass over UB (instruction-level fusion).
A fusion is taken when ENABLE_FUSION=ON, the producer's output feeds only the
activation (and is not a graph output), and the kernel's source ops stay
within MAX_FUSION_DEPTH (BatchNormalization folded into a Conv's weights is
build-time arithmetic, not a fused op, and is not counted). Every opportunity
is logged, taken or not; the ones not taken form the audit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Graph, Node
from .optlog import OptLog

ACTIVATIONS = ("Relu", "Clip", "Gelu")


@dataclass
class FusionResult:
    graph: Graph
    ops_before: int
    fused: list[dict] = field(default_factory=list)
    audit: list[dict] = field(default_factory=list)  # opportunities not taken, with the reason


def _epilogue_support(producer: Node, act: Node, g: Graph) -> tuple[bool, str, str]:
    """(can the producer's kernel apply `act`, reason code, where it runs)."""
    op = act.op_type
    lo, hi = act.attrs.get("min", float("-inf")), act.attrs.get("max", float("inf"))
    if producer.op_type == "Conv":
        x = g.values[producer.inputs[0]].shape
        depthwise = producer.attrs.get("group", 1) != 1 and producer.attrs.get("group") == x[1]
        if depthwise:
            if op == "Relu":
                return True, "epilogue_vector", "Vector pass"
            if op == "Clip" and lo == 0.0 and hi > 0:
                return True, "epilogue_vector", "Vector pass"
            return False, "epilogue_unsupported", f"{op} with min {lo} in the depthwise Vector pass"
        if op == "Relu" and not producer.attrs.get("residual"):
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


def fuse(g: Graph, model: str, enable: bool, max_depth: int, log: OptLog) -> FusionResult:
    res = FusionResult(g, ops_before=len(g.nodes))
    consumers: dict[str, list[Node]] = {}
    for n in g.nodes:
        for i in n.inputs:
            consumers.setdefault(i, []).append(n)
    producer_of = {o: n for n in g.nodes for o in n.outputs}
    outputs = {v.name for v in g.outputs}
    removed: set[str] = set()
    order = {n.name: i for i, n in enumerate(g.nodes)}
    for act in g.nodes:
        if act.op_type == "Add":
            _fuse_residual(act, g, model, enable, max_depth, log, res, consumers, producer_of, outputs, order, removed)
            continue
        if act.op_type not in ACTIVATIONS or not act.inputs or act.inputs[0] not in producer_of:
            continue
        prod = producer_of[act.inputs[0]]
        if prod.op_type in ACTIVATIONS or prod.name in removed:
            continue
        pattern = f"{prod.op_type}+{act.op_type}"
        ok, reason, where = _epilogue_support(prod, act, g)
        depth = len(prod.attrs.get("fused", [])) + 2  # the producer, what it absorbed, and this activation
        subject = f"{model}:{act.name}"
        if not enable:
            ok, reason, where = False, "fusion_off", "ENABLE_FUSION=OFF"
        elif ok and prod.attrs.get("activation"):
            ok, reason, where = False, "activation_taken", f"{prod.name} already ends with {prod.attrs['activation']}"
        elif ok and (len(consumers.get(prod.outputs[0], [])) != 1 or prod.outputs[0] in outputs):
            ok, reason, where = False, "multiple_consumers", f"{prod.outputs[0]} is also read elsewhere"
        elif ok and depth > max_depth:
            ok, reason, where = False, "depth_limit", f"depth {depth} > MAX_FUSION_DEPTH={max_depth}"
        if not ok:
            log.add("fusion", subject, f"{pattern}:rejected", reason, detail=where)
            res.audit.append({"node": act.name, "into": prod.name, "pattern": pattern, "reason": reason,
                              "detail": where})
            continue
        before = list(prod.source) or [prod.name]
        label = [prod.op_type] + ["BN"] * (len(before) - 1 - len(prod.attrs.get("fused", []))) + \
            list(prod.attrs.get("fused_types", [])) + [act.op_type]
        prod.attrs["activation"] = act.op_type
        if act.op_type == "Clip":
            prod.attrs["min"], prod.attrs["max"] = act.attrs.get("min", float("-inf")), act.attrs.get("max", float("inf"))
        prod.attrs.setdefault("fused", []).append(act.name)
        prod.attrs.setdefault("fused_types", []).append(act.op_type)
        prod.source = (list(prod.source) or [prod.name]) + [act.name]
        prod.outputs = list(act.outputs)
        producer_of[act.outputs[0]] = prod
        removed.add(act.name)
        log.add("fusion", subject, f"Fused({'+'.join(label)})", reason, into=prod.name, where=where,
                ops=len(prod.source))
        res.fused.append({"node": act.name, "into": prod.name, "pattern": pattern, "where": where})
    g.nodes = [n for n in g.nodes if n.name not in removed]
    return res


def _fuse_residual(add: Node, g: Graph, model, enable, max_depth, log, res, consumers, producer_of, outputs, order,
                   removed) -> None:
    """Conv(+BN) + Add(residual): the add joins the later of the two producing convolutions, whose kernel
    then ends with a Vector-core pass y = conv + residual (the other input exists by then)."""
    ins = [i for i in add.inputs if i]
    if len(ins) != 2 or any(i in g.initializers for i in ins) or ins[0] == ins[1]:
        return
    if g.values[ins[0]].shape != g.values[ins[1]].shape:
        return

    def ready_before(value: str, node: Node) -> bool:  # a graph input, or computed before `node`
        p = producer_of.get(value)
        return p is None or order[p.name] < order[node.name]

    # the conv that takes the add: the latest one whose other operand already exists when it runs
    convs = [(producer_of[i], ins[1 - k]) for k, i in enumerate(ins) if i in producer_of
             and producer_of[i].op_type == "Conv" and producer_of[i].attrs.get("group", 1) == 1
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
    depth = len(prod.attrs.get("fused", [])) + 2
    if not enable:
        reason, detail = "fusion_off", "ENABLE_FUSION=OFF"
    elif prod.attrs.get("activation"):
        reason, detail = "activation_taken", f"{prod.name} already ends with {prod.attrs['activation']}"
    elif prod.attrs.get("residual"):
        reason, detail = "residual_taken", f"{prod.name} already adds {prod.attrs['residual']}"
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
    prod.attrs["residual"] = other
    prod.attrs.setdefault("fused", []).append(add.name)
    prod.attrs.setdefault("fused_types", []).append("Add")
    prod.source = before + [add.name]
    prod.outputs = list(add.outputs)
    producer_of[add.outputs[0]] = prod
    removed.add(add.name)
    label = ["Conv"] + ["BN"] * (len(before) - 1) + ["Add"]
    log.add("fusion", subject, f"Fused({'+'.join(label)})", reason, into=prod.name, where=detail,
            ops=len(prod.source))
    res.fused.append({"node": add.name, "into": prod.name, "pattern": pattern, "where": detail})
