"""Lowering: kiln IR graph -> an ordered list of steps over device tensors.

Each compute node becomes one kernel step (an OpInstance the opspec stage turns
into a kernel); layout changes at the graph boundary and between layouts become
glue steps run by the executor on the host; Flatten/Reshape that do not move
bytes become views. Activations with 4 dims live as NC1HWC0 fp16, everything
else as row-major (ND) fp16. Weights are packed here, once, at build time, into
the layouts their kernels read (FRACTAL_Z, ZN, C1HWC0) and the padded fp32 bias.

Lowering rules are a table (LOWER): supporting one more op is one entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from . import KilnError
from . import layouts
from .frontend import OpInstance
from .ir import Graph, Node

C0 = 16


@dataclass(frozen=True)
class Storage:
    """How a value is held in device memory."""
    layout: str               # NC1HWC0 | ND
    logical: tuple[int, ...]  # the ONNX shape
    dtype: str = "fp16"

    @property
    def packed(self) -> tuple[int, ...]:
        if self.layout == "NC1HWC0":
            n, c, h, w = self.logical
            return (n, -(-c // C0), h, w, C0)
        return self.logical

    @property
    def nbytes(self) -> int:
        return prod(self.packed) * (2 if self.dtype == "fp16" else 4)


@dataclass
class Step:
    kind: str                      # kernel | glue
    name: str                      # the node (or nodes) it comes from
    ops: list[str]                 # source ONNX node names
    op_types: list[str]
    inputs: list[str]              # value or weight names
    output: str
    instance: OpInstance | None = None   # kernel steps
    glue: str = ""                       # glue steps: input_nchw, input_nd, to_nchw, output_nd, output_nchw
    params: list[int] = field(default_factory=list)


@dataclass
class LoweredModel:
    name: str
    source: str
    graph_inputs: list[tuple[str, tuple[int, ...]]]
    graph_outputs: list[tuple[str, tuple[int, ...]]]
    steps: list[Step]
    storage: dict[str, Storage]     # every device value (staged inputs, intermediates, outputs)
    aliases: dict[str, str]         # view value -> the value whose bytes it shares
    weights: dict[str, np.ndarray]  # packed, in first-use order
    decisions: list[str] = field(default_factory=list)


class _Lowerer:
    def __init__(self, g: Graph, model: str):
        self.g, self.model = g, model
        self.steps: list[Step] = []
        self.storage: dict[str, Storage] = {}
        self.aliases: dict[str, str] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.decisions: list[str] = []
        self.device: dict[str, str] = {}  # IR value -> device value holding it

    def fail(self, node: Node, why: str) -> KilnError:
        return KilnError("lowering", f"node '{node.name}' ({node.op_type}) of {self.model}", why)

    def shape(self, v: str) -> tuple[int, ...]:
        return tuple(self.g.values[v].shape)

    def weight(self, name: str, arr: np.ndarray) -> str:
        self.weights[name] = np.ascontiguousarray(arr)
        return name

    def const(self, node: Node, v: str) -> np.ndarray:
        if v not in self.g.initializers:
            raise self.fail(node, f"input '{v}' must be a constant (weights are baked at build time)")
        return np.asarray(self.g.initializers[v], np.float32)

    def act(self, node: Node, v: str, layout: str) -> str:
        """The device value holding IR value v in `layout`, adding a relayout step if needed."""
        if v in self.g.initializers:
            raise self.fail(node, f"constant input '{v}' where an activation is expected is not supported yet")
        dv = self.device[v]
        have = self.storage[dv].layout
        if have == layout:
            return dv
        if have == "NC1HWC0" and layout == "ND":
            n, c, h, w = self.storage[dv].logical
            if h == w == 1 and c % C0 == 0:  # (N, C1, 1, 1, 16) is byte-identical to (N, C)
                out = self.new_value(f"{dv}@nd", Storage("ND", (n, c * h * w)), alias_of=dv)
                self.decisions.append(f"{node.name}: {v} read as ND through a view (C multiple of 16, 1x1)")
                return out
            out = self.new_value(f"{dv}@nchw", Storage("ND", (n, c * h * w)))
            self.steps.append(Step("glue", f"{node.name}.relayout", [node.name], ["Relayout"], [dv], out,
                                   glue="to_nchw", params=[n, c, h, w]))
            return out
        raise self.fail(node, f"needs {v} as {layout}, which is held as {have}; no relayout for that yet")

    def new_value(self, name: str, st: Storage, alias_of: str | None = None) -> str:
        self.storage[name] = st
        if alias_of:
            self.aliases[name] = self.aliases.get(alias_of, alias_of)
        return name

    def out(self, node: Node, layout: str) -> str:
        v = node.outputs[0]
        shape = self.shape(v)
        if layout == "NC1HWC0" and len(shape) != 4:
            layout = "ND"
        self.device[v] = self.new_value(v, Storage(layout, shape))
        return v

    def kernel(self, node: Node, op_type: str, attrs: dict, inputs: list[str], layout: str) -> None:
        out = self.out(node, layout)
        ops = list(node.source) or [node.name]
        self.steps.append(Step("kernel", node.name, ops, [node.op_type], inputs, out,
                               instance=OpInstance(node.name, op_type, attrs)))

    # ---- rules -------------------------------------------------------------
    def conv(self, node: Node) -> None:
        a = node.attrs
        x, w = node.inputs[0], self.const(node, node.inputs[1])
        xs = self.shape(x)
        bias = len(node.inputs) > 2 and node.inputs[2] != ""
        group = a.get("group", 1)
        attrs = dict(input=xs, weight=tuple(w.shape), strides=tuple(a["strides"]), pads=tuple(a["pads"]),
                     dilations=tuple(a["dilations"]), group=group, bias=bias, activation="")
        if group == 1:
            wname = self.weight(f"{node.name}.w", layouts.oihw_to_fractal_z(w))
        elif group == xs[1] == w.shape[0] and w.shape[1] == 1:
            wname = self.weight(f"{node.name}.w", layouts.dw_weight_to_c1hwc0(w))
        else:
            raise self.fail(node, f"group={group} is neither 1 nor depthwise")
        ins = [self.act(node, x, "NC1HWC0"), wname]
        if bias:
            ins.append(self.weight(f"{node.name}.b", layouts.pad_bias(self.const(node, node.inputs[2]))))
        self.kernel(node, "Conv", attrs, ins, "NC1HWC0")

    def gemm(self, node: Node) -> None:
        a = node.attrs
        if node.op_type == "Gemm" and (a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0):
            raise self.fail(node, "Gemm with transA=1 or alpha/beta != 1 is not supported yet")
        x = node.inputs[0]
        xs = self.shape(x)
        if len(xs) != 2:
            raise self.fail(node, f"only 2-D activations are supported yet, got {list(xs)}")
        b = self.const(node, node.inputs[1])
        if node.op_type == "Gemm" and a.get("transB", 0):
            b = b.T
        bias = node.op_type == "Gemm" and len(node.inputs) > 2 and node.inputs[2] != ""
        ins = [self.act(node, x, "ND"), self.weight(f"{node.name}.w", layouts.kn_to_zn(b))]
        if bias:
            bv = self.const(node, node.inputs[2]).reshape(-1)
            if bv.size != b.shape[1]:
                raise self.fail(node, f"bias of {bv.size} values for {b.shape[1]} outputs: only a per-column bias is supported")
            ins.append(self.weight(f"{node.name}.b", layouts.pad_bias(bv)))
        self.kernel(node, "Gemm", dict(a=xs, b=tuple(b.shape), bias=bias, activation=""), ins, "ND")

    def eltwise(self, node: Node) -> None:
        ins = [i for i in node.inputs if i]
        if node.op_type == "Add":
            if len(ins) != 2 or self.shape(ins[0]) != self.shape(ins[1]):
                raise self.fail(node, "only Add of two activations of the same shape is supported yet (no broadcast)")
        first = self.device.get(ins[0])
        layout = self.storage[first].layout if first else "ND"
        dev = [self.act(node, v, layout) for v in ins]
        numel = prod(self.storage[dev[0]].packed)
        attrs = {"shape": (numel,), "activation": "", "bias": False}
        if node.op_type == "Clip":
            attrs.update(min=float(node.attrs.get("min", -65504.0)), max=float(node.attrs.get("max", 65504.0)))
        self.kernel(node, node.op_type, attrs, dev, layout)

    def pool(self, node: Node) -> None:
        x = node.inputs[0]
        attrs = {"input": self.shape(x), "activation": "", "bias": False}
        if node.op_type == "MaxPool":
            attrs.update(kernel_shape=tuple(node.attrs["kernel_shape"]), strides=tuple(node.attrs["strides"]),
                         pads=tuple(node.attrs["pads"]))
        self.kernel(node, node.op_type, attrs, [self.act(node, x, "NC1HWC0")], "NC1HWC0")

    def reshape(self, node: Node) -> None:
        x = node.inputs[0]
        out_shape = self.shape(node.outputs[0])
        src = self.act(node, x, "ND") if self.storage[self.device[x]].layout == "NC1HWC0" else self.device[x]
        v = node.outputs[0]
        self.device[v] = self.new_value(v, Storage("ND", out_shape), alias_of=src)
        self.decisions.append(f"{node.name}: {node.op_type} is a view of {src}")

    LOWER = {"Conv": conv, "Gemm": gemm, "MatMul": gemm, "Relu": eltwise, "Clip": eltwise, "Add": eltwise,
             "MaxPool": pool, "GlobalAveragePool": pool, "Flatten": reshape, "Reshape": reshape}

    def run(self) -> LoweredModel:
        g = self.g
        for v in g.inputs:
            shape = tuple(v.shape)
            layout = "NC1HWC0" if len(shape) == 4 else "ND"
            dv = self.new_value(f"{v.name}@staged", Storage(layout, shape))
            self.device[v.name] = dv
            self.steps.append(Step("glue", f"input {v.name}", [], ["Input"], [v.name], dv,
                                   glue="input_nchw" if layout == "NC1HWC0" else "input_nd",
                                   params=list(shape)))
        unsupported = [n for n in g.nodes if n.op_type not in self.LOWER]
        if unsupported:
            lines = "; ".join(f"node '{n.name}' ({n.op_type})" for n in unsupported[:10])
            raise KilnError("lowering", self.model, f"no kernel yet for {len(unsupported)} node(s): {lines}. "
                            f"Lowered ops: {', '.join(sorted(self.LOWER))}")
        for n in g.nodes:
            self.LOWER[n.op_type](self, n)
        outs = []
        for v in g.outputs:
            dv = self.device[v.name]
            st = self.storage[dv]
            o = self.new_value(f"{v.name}@out", Storage(st.layout, st.logical, "fp32"))
            self.steps.append(Step("glue", f"output {v.name}", [], ["Output"], [dv], o,
                                   glue="output_nchw" if st.layout == "NC1HWC0" else "output_nd",
                                   params=list(st.logical)))
            outs.append((v.name, tuple(v.shape)))
        return LoweredModel(self.model, g.source_path, [(v.name, tuple(v.shape)) for v in g.inputs], outs,
                            self.steps, self.storage, self.aliases, self.weights, self.decisions)


def lower(g: Graph, model: str) -> LoweredModel:
    return _Lowerer(g, model).run()
