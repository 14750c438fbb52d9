"""Elementwise programs: the one place chains of elementwise ops become one fused Vector kernel (instruction-level
fusion; codegen/ir/eltwise_program.py holds the ops). Runs after fusion and the patterns finder, before lowering.

Elementwise nodes (CHAIN_OPS) grow into groups along values read by one node only (and not graph outputs),
within ENABLE_FUSION and MAX_FUSION_DEPTH (each program step counts as its PROGRAM_OPS entry says). A group
becomes one EltwiseProgram node only when it holds an op the plain elementwise kernels (eltwise_vector) cannot
run: Sigmoid, HardSigmoid, HardSwish, Sum, a broadcasting or non-scalar constant operand, Sub/Div of two
tensors, a scalar minus or over a tensor, or a group that reads nothing but a Resize's output (the resize kernel
takes it whole as its epilogue: codegen/passes/program_epilogue.py). Every other group is left as it was, so
those kernels stay as they were. Each decision is logged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import KilnError
from ..ir.eltwise_program import MIRRORED, PROGRAM_OPS, f32
from ..ir.graph import Graph, Node
from ..ir.optlog import OptLog
from .patterns import Patterns

UNARY = {"Sqrt": "sqrt", "Reciprocal": "reciprocal", "Exp": "exp", "Log": "log", "Abs": "abs", "Neg": "neg",
         "Tanh": "tanh", "Erf": "erf", "Softplus": "softplus"}
VARIADIC = ("Sum", "Max", "Min", "Mean")
COMPARE = {"Less": "less", "Greater": "greater", "Equal": "equal", "LessOrEqual": "lessequal",
           "GreaterOrEqual": "greaterequal"}
CONDITION_OPS = ("Where", "Not", *COMPARE)
BROADCASTS = ("Expand", "Tile")  # a copy of the operand in its broadcast form: Muls 1 (keeps NaN and -0)
CHAIN_OPS = ("Sigmoid", "HardSigmoid", "HardSwish", "Relu", "Clip", "Add", "Sub", "Mul", "Div", *VARIADIC, "Pow",
             "LeakyRelu", "PRelu", *UNARY, *CONDITION_OPS, *BROADCASTS)
NEW_OPS = ("Sigmoid", "HardSigmoid", "HardSwish", *VARIADIC, "Pow", "LeakyRelu", "PRelu", *UNARY, *CONDITION_OPS,
           *BROADCASTS)
ARITY = {**dict.fromkeys(("Add", "Sub", "Mul", "Div", "Pow", "PRelu", *COMPARE), 2), "Where": 3}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
FpStep = tuple[str, list[str], tuple[float, ...]]  # (program op, argument value names, params)


@dataclass
class _Group:
    nodes: list[Node]
    steps: list[tuple] = field(default_factory=list)  # (op, args, params, output value)
    needs_program: bool = False

    @property
    def output(self) -> str:
        return self.nodes[-1].outputs[0]

    @property
    def depth(self) -> int:
        return sum(PROGRAM_OPS[s[0]].depth for s in self.steps)


def _scalar(g: Graph, v: str) -> float | None:
    if v in g.initializers and g.initializers[v].size == 1:
        return float(np.asarray(g.initializers[v], np.float64).reshape(-1)[0])
    return None


def _binary_steps(g: Graph, n: Node, a: str, b: str) -> tuple[list[FpStep], bool]:
    """A binary op's steps and whether eltwise_vector could not run it."""
    op, ca, cb = n.op_type, _scalar(g, a), _scalar(g, b)
    if cb is not None:
        x, c = a, cb
        step = {"Add": ("adds", c), "Sub": ("adds", -c), "Mul": ("muls", c), "Div": ("muls", 1.0 / c)}[op]
        return [(step[0], [x], (step[1],))], False
    if ca is not None:
        step = {"Add": ("adds", ca), "Sub": ("rsubs", ca), "Mul": ("muls", ca), "Div": ("rdivs", ca)}[op]
        return [(step[0], [b], (step[1],))], op in ("Sub", "Div")
    same = tuple(g.values[a].shape) == tuple(g.values[b].shape)
    plain = op in ("Add", "Mul") and same and a not in g.initializers and b not in g.initializers
    return [(BINARY[op], [a, b], ())], not plain


def node_steps(g: Graph, n: Node) -> tuple[list[FpStep], bool]:
    """The program steps of one node (its fused activation included) and whether it needs a program."""
    ins = [i for i in n.inputs if i]
    a = n.attrs
    if n.op_type in BINARY:
        steps, new = _binary_steps(g, n, ins[0], ins[1])
    elif n.op_type in VARIADIC:
        steps, new = _variadic_steps(g, n.op_type, ins), True
    elif n.op_type in UNARY:
        steps, new = [(UNARY[n.op_type], [ins[0]], ())], True
    elif n.op_type in BROADCASTS:
        steps, new = [("muls", [ins[0]], (1.0,))], True
    elif n.op_type in CONDITION_OPS:
        steps, new = _condition_steps(g, n.op_type, ins), True
    elif n.op_type in ("Pow", "PRelu", "LeakyRelu") or (n.op_type == "Clip" and len(ins) > 1):
        steps, new = _param_steps(g, n, ins), True
    else:
        params = {"HardSigmoid": (a.get("alpha", 0.2), a.get("beta", 0.5)),
                  "Clip": (a.get("min", -math.inf), a.get("max", math.inf))}.get(n.op_type, ())
        steps, new = [(n.op_type.lower(), [ins[0]], tuple(params))], n.op_type in NEW_OPS
    act = n.fused.activation  # "@k": the node's own k-th step
    if act == "Relu":
        steps.append(("relu", [f"@{len(steps) - 1}"], ()))
    elif act == "Clip":
        assert n.fused.clip is not None
        steps.append(("clip", [f"@{len(steps) - 1}"], tuple(n.fused.clip)))
    return steps, new


_VARIADIC_STEPS = {"Sum": ("add", "adds"), "Mean": ("add", "adds"), "Max": ("max", "maxs"), "Min": ("min", "mins")}


def _variadic_steps(g: Graph, op: str, ins: list[str]) -> list[FpStep]:
    """Sum, Mean, Max, Min: the tensors pairwise, then each scalar constant; one tensor alone is a copy (Sum:
    + 0; Max, Min: * 1, which keeps NaN and -0). Mean then scales by 1 / (number of inputs)."""
    pair, scalar_op = _VARIADIC_STEPS[op]
    tensors = [i for i in ins if _scalar(g, i) is None]
    scalars = [c for i in ins if (c := _scalar(g, i)) is not None]
    steps: list[FpStep] = []
    acc = tensors[0]
    for j, t in enumerate(tensors[1:]):
        steps.append((pair, [acc, t], ()))
        acc = f"@{j}"
    steps += [(scalar_op, [f"@{len(steps) - 1}" if steps else acc], (c,)) for c in scalars]
    if op == "Mean":
        steps.append(("muls", [f"@{len(steps) - 1}" if steps else acc], (1.0 / len(ins),)))
    elif not steps:
        steps.append(("adds", [acc], (0.0,)) if op == "Sum" else ("muls", [acc], (1.0,)))
    return steps


def pow_step(exponent: float) -> tuple[str, tuple[float, ...]]:
    """The program op of x ** exponent (a constant, not 0): sqrt, rsqrt, an integer power by multiplications,
    else exp(p * ln x)."""
    if exponent == 0.5:
        return "sqrt", ()
    if exponent == -0.5:
        return "rsqrt", ()
    if exponent == int(exponent):
        return "powi", (exponent,)
    return "powf", (exponent,)


def _param_steps(g: Graph, n: Node, ins: list[str]) -> list[FpStep]:
    """Pow (a constant scalar exponent, onnx_rules.check_pow), LeakyRelu, PRelu (a scalar slope is a LeakyRelu),
    Clip with a bound computed at run time (max, then min)."""
    if n.op_type == "Pow":
        op, params = pow_step(_scalar(g, ins[1]))  # type: ignore[arg-type]  # checked by the frontend
        return [(op, [ins[0]], params)]
    if n.op_type == "LeakyRelu":
        return [("leakyrelu", [ins[0]], (n.attrs.get("alpha", 0.01),))]
    if n.op_type == "PRelu":
        slope = _scalar(g, ins[1])
        return [("leakyrelu", [ins[0]], (slope,))] if slope is not None else [("prelu", [ins[0], ins[1]], ())]
    steps: list[FpStep] = []
    for k, key, pair, scalar_op in ((1, "min", "max", "maxs"), (2, "max", "min", "mins")):
        v = n.inputs[k] if len(n.inputs) > k else ""  # a run-time bound; a constant one is an attribute
        c = _scalar(g, v) if v else n.attrs.get(key, math.inf if key == "max" else -math.inf)
        if v or math.isfinite(c):  # type: ignore[arg-type]
            x = f"@{len(steps) - 1}" if steps else ins[0]
            steps.append((scalar_op, [x], (c,)) if c is not None else (pair, [x, v], ()))
    return steps


def _condition_steps(g: Graph, op: str, ins: list[str]) -> list[FpStep]:
    """Where (a scalar constant x or y Dup'ed: wherex, wherey, wherexy), Not, the comparisons (a scalar constant
    operand as the *s form; on the left, the mirrored comparison). A condition is a 1 / 0 tile."""
    if op == "Not":
        return [("not", [ins[0]], ())]
    if op in COMPARE:
        name, (a, b) = COMPARE[op], ins
        ca, cb = _scalar(g, a), _scalar(g, b)
        if cb is not None:
            return [(name + "s", [a], (cb,))]
        return [(MIRRORED[name] + "s", [b], (ca,))] if ca is not None else [(name, [a, b], ())]
    c, x, y = ins
    cs = _scalar(g, c)
    if cs is not None:  # a constant scalar condition picks one operand (a tensor: onnx_rules.check_where)
        return [("muls", [x if cs else y], (1.0,))]
    xs, ys = _scalar(g, x), _scalar(g, y)
    if xs is not None and ys is not None:
        return [("wherexy", [c], (xs, ys))]
    if xs is not None:
        return [("wherex", [c, y], (xs,))]
    return [("wherey", [c, x], (ys,))] if ys is not None else [("where", [c, x, y], ())]


def _capable(n: Node, patterns: Patterns, g: Graph) -> bool:
    f = n.fused
    plain = not (f.residual or f.second or f.chain_first or f.siblings) and len(f.ops) == (1 if f.activation else 0)
    ins = [i for i in n.inputs if i]
    tensors = [i for i in ins if i not in g.initializers]
    arity = ARITY.get(n.op_type, 1)
    return (n.op_type in CHAIN_OPS and plain and not patterns.absorbed(n.name) and len(n.outputs) == 1
            and bool(tensors) and (n.op_type in (*VARIADIC, "Clip") or len(ins) == arity))


def _readers(g: Graph) -> tuple[dict[str, set[str]], set[str]]:
    """value -> names of the nodes reading it (fused operands included); the graph outputs."""
    readers: dict[str, set[str]] = {}
    for n in g.nodes:
        second = n.fused.second
        for i in list(n.inputs) + [n.fused.residual] + (list(second.inputs[:1]) if second else []):
            if i:
                readers.setdefault(i, set()).add(n.name)
    return readers, {v.name for v in g.outputs}


class _Former:
    def __init__(self, g: Graph, patterns: Patterns, model: str, limits, log: OptLog):
        self.g, self.patterns, self.model, self.limits, self.log = g, patterns, model, limits, log
        self.readers, self.outputs = _readers(g)
        self.group_of: dict[str, _Group] = {}  # a group's output value -> the group

    def grow(self) -> list[_Group]:
        groups: list[_Group] = []
        for n in self.g.nodes:
            if not _capable(n, self.patterns, self.g):
                continue
            steps, new = node_steps(self.g, n)
            group = _Group([n], _named(steps, n.outputs[0]), new)
            for v in dict.fromkeys(i for i in n.inputs if i in self.group_of):
                producer = self.group_of[v]
                if self.joins(producer, group, v, n):
                    group = _Group(producer.nodes + group.nodes, producer.steps + group.steps,
                                   producer.needs_program or group.needs_program)
                    groups.remove(producer)
                    del self.group_of[v]
            groups.append(group)
            self.group_of[n.outputs[0]] = group
        return groups

    def joins(self, producer: _Group, group: _Group, v: str, n: Node) -> bool:
        """Whether the group producing v joins n's: logged when either side needs a program."""
        if self.readers.get(v, set()) != {n.name} or v in self.outputs:
            return False
        ok, reason, detail = True, "vector_chain", "one Vector pass over UB"
        if not self.limits.enable:
            ok, reason, detail = False, "fusion_off", "ENABLE_FUSION=OFF"
        elif producer.depth + group.depth > self.limits.max_depth:
            ok, reason = False, "depth_limit"
            detail = f"depth {producer.depth + group.depth} > MAX_FUSION_DEPTH={self.limits.max_depth}"
        if producer.needs_program or group.needs_program:
            label = "+".join(m.op_type for m in producer.nodes + group.nodes)
            self.log.add("fusion", f"{self.model}:{n.name}",
                         f"EltwiseProgram({label})" + ("" if ok else ":rejected"), reason, detail=detail)
        return ok

    def after_resize(self, group: _Group) -> bool:
        """Whether the group reads only a Resize's output (of its shape; constants folded into its steps), read by
        nothing else: formed as a program even when the plain elementwise kernels could run it, so that the
        resize kernel can take it as its epilogue (program_epilogue.py decides and logs)."""
        names = {s[3] for s in group.steps}
        external = {a for s in group.steps for a in s[1] if a not in names}
        if not self.limits.enable or len(external) != 1:
            return False
        v = external.pop()
        producer = next((n for n in self.g.nodes if v in n.outputs), None)
        return (producer is not None and producer.op_type == "Resize" and v not in self.outputs
                and self.readers.get(v, set()) <= {m.name for m in group.nodes}
                and tuple(self.g.values[v].shape) == tuple(self.g.values[group.output].shape))

    def program_node(self, group: _Group) -> Node:
        """One EltwiseProgram node for the group: its external inputs, operand forms and numbered steps."""
        out = group.output
        shape = tuple(self.g.values[out].shape)
        names = {s[3] for s in group.steps}
        external = list(dict.fromkeys(a for s in group.steps for a in s[1] if a not in names))
        forms = [self.form(group.nodes[-1], v, shape) for v in external]
        index = {v: i for i, v in enumerate(external)}
        index.update({s[3]: len(external) + j for j, s in enumerate(group.steps)})
        steps = tuple((op, tuple(index[a] for a in args), tuple(f32(p) for p in params))
                      for op, args, params, _ in group.steps)
        source = [o for m in group.nodes for o in (list(m.source) or [m.name])]
        last = group.nodes[-1]
        return Node(last.name, "EltwiseProgram", external, [out],
                    {"steps": steps, "forms": tuple(forms), "op_types": tuple(m.op_type for m in group.nodes)},
                    source)

    def form(self, node: Node, v: str, shape: tuple[int, ...]) -> str:
        """How input v broadcasts to the program's output shape (refused naming the node otherwise)."""
        vs = tuple(self.g.values[v].shape)
        if vs == shape:
            return "full"
        if math.prod(vs) == 1 and v not in self.g.initializers:  # a run-time scalar (Clip's bound)
            return "scalar"
        aligned = (1,) * (len(shape) - len(vs)) + vs
        if len(shape) == 4 and aligned[1:] == (shape[1], 1, 1) and aligned[0] in (1, shape[0]):
            return "channel" if aligned[0] == shape[0] else "channel1"
        if len(shape) >= 2 and aligned[-1] == shape[-1] and set(aligned[:-1]) == {1}:
            return "row"
        raise KilnError("lowering", f"node '{node.name}' ({node.op_type}) of {self.model}",
                        f"operand '{v}' of shape {list(vs)} broadcasts to {list(shape)} in a way no elementwise "
                        f"kernel supports yet; supported: the same shape, a scalar, per channel "
                        f"([N,C,1,1] or [1,C,1,1] over a 4-D [N,C,H,W]), or a row ([1,..,L] over [..,M,L], not 4-D)")


def _named(steps: list[FpStep], out: str) -> list[tuple]:
    """Steps with their output value: the node's output for the last, '<out>#k' before; '@k' resolved."""
    names = [f"{out}#{k}" for k in range(len(steps) - 1)] + [out]
    return [(op, [names[int(a[1:])] if a.startswith("@") else a for a in args], params, names[k])
            for k, (op, args, params) in enumerate(steps)]


def form_programs(g: Graph, patterns: Patterns, model: str, limits, log: OptLog) -> list[str]:
    """Rewrite `g` (in place): each group needing a program becomes one EltwiseProgram node at its last node's
    place. limits: the fusion limits (enable, max_depth). Returns the lowering decisions it explains."""
    former = _Former(g, patterns, model, limits, log)
    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    decisions = []
    for group in former.grow():
        if not (group.needs_program or former.after_resize(group)):
            continue
        node = former.program_node(group)
        replaced[group.nodes[-1].name] = node
        removed.update(m.name for m in group.nodes[:-1])
        ops = ", ".join(m.op_type for m in group.nodes)
        decisions.append(f"{node.name}: {len(group.nodes)} elementwise node(s) ({ops}) as one "
                         f"eltwise_program kernel, inputs {', '.join(node.attrs['forms'])}")
    g.nodes = [replaced.get(n.name, n) for n in g.nodes if n.name not in removed]
    return decisions
