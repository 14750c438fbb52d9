"""Lowering: kiln IR graph -> an ordered list of steps over device tensors.

Each compute node becomes one kernel step (an OpInstance the opspec stage turns
into a kernel); layout changes at the graph boundary and between layouts become
glue steps run by the executor on the host; Flatten/Reshape that do not move
bytes become views. Activations with 4 dims live as NC1HWC0 fp16, everything
else as row-major (ND) fp16. Weights are packed here, once, at build time, into
the layouts their kernels read (FRACTAL_Z, ZN, C1HWC0) and the padded fp32 bias;
Cube weights in the build's KILN_DTYPE (fp16, or bf16 as uint16 bit patterns).

Lowering rules are a table (LOWER): supporting one more op is one entry.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import prod
from typing import ClassVar

import numpy as np

from .. import KilnError
from ..ir import layouts
from ..ir.eltwise_program import encode
from ..ir.graph import Graph, Node, OpInstance
from .eltwise_programs import CHAIN_OPS as PROGRAM_CHAIN_OPS  # lowered as elementwise programs
from .patterns import Patterns, find_patterns

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

    @property
    def kernel_op(self) -> OpInstance:
        """A kernel step's op instance (a glue step has none)."""
        assert self.instance is not None, f"step {self.name} is not a kernel"
        return self.instance


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
    alias_offsets: dict[str, int] = field(default_factory=dict)  # view value -> byte offset in its root (slices)


class _Lowerer:
    def __init__(self, g: Graph, model: str, dtype: str = "fp16", patterns: Patterns | None = None):
        self.g, self.model = g, model
        self.patterns = patterns if patterns is not None else find_patterns(g)
        self.dtype = dtype  # the Cube kernels' operand type (KILN_DTYPE): their weights are packed in it
        self.steps: list[Step] = []
        self.storage: dict[str, Storage] = {}
        self.aliases: dict[str, str] = {}
        self.alias_offsets: dict[str, int] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.decisions: list[str] = []
        self.device: dict[str, str] = {}  # IR value -> device value holding it
        self.trans_b_values: set[str] = set()       # IR values held as B^T on the device

    def cube_dtype(self) -> dict:
        """The operand type attribute of a Cube op instance (none for fp16: its specs are as they always were)."""
        return {} if self.dtype == "fp16" else {"dtype": self.dtype}

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

    def new_value(self, name: str, st: Storage, alias_of: str | None = None, offset: int = 0) -> str:
        """A device value; alias_of: a view of that value's bytes, starting `offset` bytes into it."""
        self.storage[name] = st
        if alias_of:
            self.aliases[name] = self.aliases.get(alias_of, alias_of)
            offset += self.alias_offsets.get(alias_of, 0)
            if offset:
                self.alias_offsets[name] = offset
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
    @staticmethod
    def epilogue(node: Node) -> dict:
        """The activation the fusion stage attached to this node, as kernel attributes."""
        act = node.fused.activation
        out: dict = {"activation": act}
        if act == "Clip":
            assert node.fused.clip is not None, f"{node.name}: a fused Clip without its bounds"
            out.update(min=float(node.fused.clip[0]), max=float(node.fused.clip[1]))
        return out

    def conv(self, node: Node) -> None:
        if node.fused.chain_first is not None:
            return self.conv_chain(node)
        a = node.attrs
        x, w = node.inputs[0], self.const(node, node.inputs[1])
        xs = self.shape(x)
        bias = len(node.inputs) > 2 and node.inputs[2] != ""
        group = a.get("group", 1)
        attrs = dict(input=xs, weight=tuple(w.shape), strides=tuple(a["strides"]), pads=tuple(a["pads"]),
                     dilations=tuple(a["dilations"]), group=group, bias=bias, **self.epilogue(node))
        if group == 1:
            attrs.update(self.cube_dtype())
            wname = self.weight(f"{node.name}.w", layouts.oihw_to_fractal_z(w, self.dtype))
        elif group == xs[1] == w.shape[0] and w.shape[1] == 1:
            wname = self.weight(f"{node.name}.w", layouts.dw_weight_to_c1hwc0(w))
        else:
            raise self.fail(node, f"group={group} is neither 1 nor depthwise")
        ins = [self.act(node, x, "NC1HWC0"), wname]
        second = node.fused.second  # a 1x1 conv accumulated into the same L0C (fusion)
        b = self.const(node, node.inputs[2]) if bias else None
        if second is not None and len(second.inputs) > 2 and second.inputs[2]:
            b2 = self.const(second, second.inputs[2])  # both biases land in one bias table
            b = b2 if b is None else (b.astype(np.float32) + b2.astype(np.float32))
        if b is not None:
            attrs["bias"] = True
            ins.append(self.weight(f"{node.name}.b", layouts.pad_bias(b)))
        if node.fused.residual:  # fused residual add: y = act(conv + residual)
            attrs["residual"] = True
            ins.append(self.act(node, node.fused.residual, "NC1HWC0"))
        if second is not None:
            x2, w2 = second.inputs[0], self.const(second, second.inputs[1])
            x2s = self.shape(x2)
            attrs["second"] = (int(x2s[1]), int(x2s[2]), int(x2s[3]), int(second.attrs["strides"][0]))
            ins.append(self.act(node, x2, "NC1HWC0"))
            ins.append(self.weight(f"{second.name}.w", layouts.oihw_to_fractal_z(w2, self.dtype)))
        self.kernel(node, "Conv", attrs, ins, "NC1HWC0")

    def conv_chain(self, node: Node) -> None:
        """A window conv whose activated output only a 1x1 conv reads, fused (fusion stage): one kernel,
        the intermediate kept in L1. `node` is the 1x1 conv; attrs describe the first conv's window."""
        first = node.fused.chain_first
        assert first is not None, f"{node.name} is not a fused conv chain"
        fa = first.attrs
        x, w1 = first.inputs[0], self.const(first, first.inputs[1])
        w2 = self.const(node, node.inputs[1])
        b1 = len(first.inputs) > 2 and first.inputs[2] != ""
        b2 = len(node.inputs) > 2 and node.inputs[2] != ""
        attrs = dict(input=self.shape(x), weight=tuple(w1.shape), strides=tuple(fa["strides"]),
                     pads=tuple(fa["pads"]), dilations=tuple(fa["dilations"]), group=1, bias=b2,
                     mid=(int(w1.shape[0]), b1, first.fused.activation == "Relu"), cout=int(w2.shape[0]),
                     **self.cube_dtype(), **self.epilogue(node))
        ins = [self.act(node, x, "NC1HWC0"), self.weight(f"{first.name}.w", layouts.oihw_to_fractal_z(w1, self.dtype))]
        if b1:
            ins.append(self.weight(f"{first.name}.b", layouts.pad_bias(self.const(first, first.inputs[2]))))
        ins.append(self.weight(f"{node.name}.w", layouts.oihw_to_fractal_z(w2, self.dtype)))
        if b2:
            ins.append(self.weight(f"{node.name}.b", layouts.pad_bias(self.const(node, node.inputs[2]))))
        if node.fused.residual:
            attrs["residual"] = True
            ins.append(self.act(node, node.fused.residual, "NC1HWC0"))
        self.kernel(node, "Conv", attrs, ins, "NC1HWC0")

    def gemm_operands(self, node: Node) -> tuple[np.ndarray, np.ndarray | None, Node]:
        """A GEMM's [K, N] weight, its per-column bias (None: none) and the node as lowered: with MatMul +
        Add(constant row) the Add is the bias and the GEMM writes the Add's output."""
        b = self.const(node, node.inputs[1])
        if node.op_type == "Gemm" and node.attrs.get("transB", 0):
            b = b.T
        bias_value = node.inputs[2] if node.op_type == "Gemm" and len(node.inputs) > 2 and node.inputs[2] else None
        if node.name in self.patterns.bias_add:
            add = self.patterns.bias_add[node.name]
            bias_value = next(i for i in add.inputs if i in self.g.initializers)
            self.decisions.append(f"{node.name}: {add.name} folded into the GEMM as its bias")
            node = Node(node.name, node.op_type, node.inputs, add.outputs, node.attrs,
                        (list(node.source) or [node.name]) + [add.name], node.fused)
        if bias_value is None:
            return b, None, node
        bias = self.const(node, bias_value).reshape(-1)
        if bias.size != b.shape[1]:
            raise self.fail(node, f"bias of {bias.size} values for {b.shape[1]} outputs: only a per-column bias is "
                                  f"supported")
        return b, bias, node

    def gemm_siblings(self, node: Node) -> None:
        """Sibling GEMMs of one input (fusion): one GEMM over their weights side by side, writing result j as
        the j-th [M, N] slice of its output; each member's value is a view of its slice."""
        x = node.inputs[0]
        xs = self.shape(x)
        m = prod(xs[:-1])
        siblings = list(node.fused.siblings)
        absorbed = {o for mem in siblings for o in (list(mem.source) or [mem.name])}
        lead = Node(node.name, node.op_type, node.inputs, node.outputs, node.attrs,
                    [o for o in (list(node.source) or [node.name]) if o not in absorbed], node.fused)
        lowered = [self.gemm_operands(mem) for mem in [lead] + siblings]
        n = lowered[0][0].shape[1]
        ins = [self.act(node, x, "ND"), self.weight(f"{node.name}.siblings.w",
                                                    layouts.kn_to_zn(np.concatenate([b for b, _, _ in lowered], 1),
                                                                     self.dtype))]
        has_bias = any(bias is not None for _, bias, _ in lowered)
        if has_bias:
            ins.append(self.weight(f"{node.name}.siblings.b", layouts.pad_bias(np.concatenate(
                [np.zeros(n, np.float32) if bias is None else bias for _, bias, _ in lowered]))))
        out = self.new_value(f"{node.name}@siblings", Storage("ND", (len(lowered), m, n)))  # device-only
        attrs = dict(a=(m, xs[-1]), b=(xs[-1], n * len(lowered)), bias=has_bias, split=n, **self.cube_dtype(),
                     **self.epilogue(node))
        self.steps.append(Step("kernel", node.name, [o for _, _, mem in lowered for o in (mem.source or [mem.name])],
                               [mem.op_type for _, _, mem in lowered], ins, out,
                               instance=OpInstance(node.name, "Gemm", attrs)))
        for j, (_, _, mem) in enumerate(lowered):
            v = mem.outputs[0]
            shape = self.shape(v)
            if prod(shape) != m * n:
                raise self.fail(node, f"sibling result {v} of shape {list(shape)} is not [{m}, {n}]")
            self.device[v] = self.new_value(v, Storage("ND", shape), alias_of=out, offset=j * m * n * 2)

    def gemm(self, node: Node) -> None:
        if node.fused.siblings:
            return self.gemm_siblings(node)
        a = node.attrs
        if node.op_type == "Gemm" and (a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0):
            raise self.fail(node, "Gemm with transA=1 or alpha/beta != 1 is not supported yet")
        x = node.inputs[0]
        if node.op_type == "MatMul" and node.inputs[1] not in self.g.initializers:
            return self.batched_matmul(node)
        xs = self.shape(x)
        if len(xs) < 2:
            raise self.fail(node, f"needs an activation of 2 or more dims, got {list(xs)}")
        xs = (prod(xs[:-1]), xs[-1])  # leading dims flatten into M: row-major ND needs no data movement
        b, bias, node = self.gemm_operands(node)
        ins = [self.act(node, x, "ND"), self.weight(f"{node.name}.w", layouts.kn_to_zn(b, self.dtype))]
        if bias is not None:
            ins.append(self.weight(f"{node.name}.b", layouts.pad_bias(bias)))
        self.kernel(node, "Gemm", dict(a=xs, b=tuple(b.shape), bias=bias is not None, **self.cube_dtype(),
                                       **self.epilogue(node)), ins, "ND")

    def scalar_const(self, v: str) -> float | None:
        if v in self.g.initializers and self.g.initializers[v].size == 1:
            return float(np.asarray(self.g.initializers[v]).reshape(-1)[0])
        return None

    def eltwise(self, node: Node) -> None:
        ins = [i for i in node.inputs if i]
        if node.op_type in ("Add", "Mul", "Div", "Sub") and len(ins) == 2:
            c = self.scalar_const(ins[1]) if ins[0] not in self.g.initializers else self.scalar_const(ins[0])
            if c is not None:  # x op scalar: one scalar Vector instruction per repeat
                x = ins[0] if ins[1] in self.g.initializers else ins[1]
                if node.op_type == "Div" and x != ins[0]:
                    raise self.fail(node, "scalar / tensor is not supported yet")
                if node.op_type == "Sub" and x != ins[0]:
                    raise self.fail(node, "scalar - tensor is not supported yet")
                op, val = {"Add": ("Adds", c), "Sub": ("Adds", -c), "Mul": ("Muls", c),
                           "Div": ("Muls", 1.0 / c)}[node.op_type]
                dv = self.act(node, x, self.storage[self.device[x]].layout)
                attrs = {"shape": (prod(self.storage[dv].packed),), "activation": "", "bias": False, "scalar": val}
                self.kernel(node, op, attrs, [dv], self.storage[dv].layout)
                return
        if node.op_type in ("Div", "Sub"):
            raise self.fail(node, f"{node.op_type} of two tensors has no kernel yet")
        if node.op_type in ("Add", "Mul") and (len(ins) != 2 or self.shape(ins[0]) != self.shape(ins[1])):
            raise self.fail(node, f"only {node.op_type} of two activations of the same shape or with a scalar "
                                  "constant is supported yet (no broadcast)")
        first = self.device.get(ins[0])
        layout = self.storage[first].layout if first else "ND"
        dev = [self.act(node, v, layout) for v in ins]
        numel = prod(self.storage[dev[0]].packed)
        attrs = {"shape": (numel,), "bias": False, **self.epilogue(node)}
        if node.op_type == "Clip":
            attrs.update(min=float(node.attrs.get("min", -65504.0)), max=float(node.attrs.get("max", 65504.0)))
        self.kernel(node, node.op_type, attrs, dev, layout)

    def eltwise_program(self, node: Node) -> None:
        """A chain of elementwise ops formed by codegen/passes/eltwise_programs.py: one kernel over the output's
        layout (NC1HWC0 for 4-D, else ND); a per-channel input as its (n, c1) C0 blocks, constants packed."""
        out_shape = self.shape(node.outputs[0])
        forms = node.attrs["forms"]
        named = replace(node, op_type="+".join(node.attrs["op_types"]))  # refusals name the source ops
        full = [v for v, f in zip(node.inputs, forms) if f == "full" and v not in self.g.initializers]
        layout = self.storage[self.device[full[0]]].layout if full else ("NC1HWC0" if len(out_shape) == 4 else "ND")
        if len(out_shape) != 4:
            layout = "ND"
        if layout != "NC1HWC0" and any(f.startswith("channel") for f in forms):
            raise self.fail(named, f"a per-channel operand needs the 4-D output {list(out_shape)} held as NC1HWC0")
        if layout != "ND" and "row" in forms:
            raise self.fail(named, f"a row operand (broadcast over the rows of the last axis) needs a flat output; "
                                  f"{list(out_shape)} is held as {layout}")
        ins = [self.program_operand(node, v, f, layout, out_shape) for v, f in zip(node.inputs, forms)]
        attrs = {"shape": out_shape, "layout": layout, "forms": ",".join(forms),
                 "program": encode(node.attrs["steps"]), "activation": "", "bias": False}
        out = self.out(node, layout)
        self.steps.append(Step("kernel", node.name, list(node.source) or [node.name], list(node.attrs["op_types"]),
                               ins, out, instance=OpInstance(node.name, "EltwiseProgram", attrs)))

    def program_operand(self, node: Node, v: str, form: str, layout: str, out_shape: tuple[int, ...]) -> str:
        if v not in self.g.initializers:
            return self.act(node, v, {"full": layout, "row": "ND"}.get(form, "NC1HWC0"))
        c = np.asarray(self.g.initializers[v], np.float32)
        if form == "row":
            packed = c.reshape(-1).astype(np.float16)
        elif form == "full":
            packed = layouts.nchw_to_nc1hwc0(c) if layout == "NC1HWC0" else c.astype(np.float16)
        else:  # [1 or N, C, 1, 1] -> (1 or N, C1, C0), zero in the padded channels
            c = c.reshape((1,) * (4 - c.ndim) + c.shape)
            packed = layouts.nchw_to_nc1hwc0(c)
        return self.weight(f"{node.name}.{v}", np.ascontiguousarray(packed.reshape(-1)))

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

    def batched_matmul(self, node: Node) -> None:
        a, b = node.inputs[:2]
        ash, bsh = self.shape(a), self.shape(node.inputs[1])
        if len(ash) < 3 or ash[:-2] != bsh[:-2]:
            raise self.fail(node, f"MatMul of two activations needs equal leading dims, got {list(ash)} x {list(bsh)}")
        trans_b = b in self.trans_b_values
        batch, m, k, n = prod(ash[:-2]), ash[-2], ash[-1], bsh[-1]
        ins = [self.act(node, a, "ND"), self.device[b] if trans_b else self.act(node, b, "ND")]
        self.kernel(node, "BatchedMatMul", dict(batch=batch, m=m, k=k, n=n, trans_b=trans_b, activation="", bias=False,
                                                **self.cube_dtype()),
                    ins, "ND")

    def attention(self, node: Node) -> None:
        """Q.K^T -> scale -> softmax -> .V fused (fusion stage) into one flash-attention kernel. It reads Q and V
        as [batch, heads, seq, d] and K as [batch, heads, kv, d]: either the heads-split K itself (the fusion
        absorbed its Transpose to K^T) or the transposed-B value a Transpose (0,2,3,1) is stored as."""
        q, k, v = node.inputs[:3]
        qs, vs = self.shape(q), self.shape(v)
        if node.attrs["k_layout"] == "bt" and k not in self.trans_b_values:
            raise self.fail(node, f"K^T {k} is not held as K [batch, heads, kv, d]; no kernel transposes it yet")
        if len(qs) != 4 or len(vs) != 4:
            raise self.fail(node, f"attention needs 4-D Q and V, got {list(qs)} and {list(vs)}")
        b, h, sq, d = qs
        kv = vs[2]
        ins = [self.act(node, q, "ND"), self.device[k] if node.attrs["k_layout"] == "bt" else self.act(node, k, "ND"),
               self.act(node, v, "ND")]
        attrs = dict(batch=b, heads=h, q=sq, kv=kv, d=d, scale=float(node.attrs["scale"]), mask=len(node.inputs) > 3,
                     activation="", bias=False)
        if attrs["mask"]:  # [batch, 1, 1, kv]: the same bytes as [batch, kv]
            m = node.inputs[3]
            ins.append(self.weight(f"{node.name}.mask", self.const(node, m).reshape(b, kv).astype(np.float16))
                       if m in self.g.initializers else self.act(node, m, "ND"))
        out = self.out(node, "ND")
        self.steps.append(Step("kernel", node.name, list(node.source) or [node.name],
                               ["Attention"] + list(node.fused.op_types), ins, out,
                               instance=OpInstance(node.name, "Attention", attrs)))
        self.decisions.append(f"{node.name}: Q.K^T, scale {node.attrs['scale']:g}, softmax and .V as one "
                              f"attention_flash kernel")

    def transpose(self, node: Node) -> None:
        x, perm = node.inputs[0], tuple(node.attrs["perm"])
        xs = self.shape(x)
        if node.name in self.patterns.b_transposes:  # feeds a MatMul as B: store B^T = x.transpose(0,2,1,3)
            out = node.outputs[0]
            dv = self.new_value(f"{out}@bt", Storage("ND", (xs[0], xs[2], xs[1], xs[3])))
            self.device[out] = dv
            self.trans_b_values.add(out)
            self.steps.append(Step("kernel", node.name, [node.name], ["Transpose"], [self.act(node, x, "ND")], dv,
                                   instance=OpInstance(node.name, "Transpose0213",
                                                       {"input": xs, "activation": "", "bias": False})))
            self.decisions.append(f"{node.name}: perm {list(perm)} feeding a MatMul as B is read as B^T "
                                  f"(perm 0,2,1,3 and a transposed-B GEMM)")
            return
        if len(xs) != 4 or perm != (0, 2, 1, 3):
            raise self.fail(node, f"Transpose perm {list(perm)} of {list(xs)} has no kernel yet (supported: 0,2,1,3)")
        self.kernel(node, "Transpose0213", {"input": xs, "activation": "", "bias": False}, [self.act(node, x, "ND")],
                    "ND")

    def row_op(self, node: Node) -> None:
        x = node.inputs[0]
        xs = self.shape(x)
        axis = node.attrs.get("axis", -1)
        if axis not in (-1, len(xs) - 1):
            raise self.fail(node, f"{node.op_type} over axis {axis} of {list(xs)}: only the last axis is supported")
        attrs = {"rows": prod(xs[:-1]), "length": xs[-1], "activation": "", "bias": False}
        ins = [self.act(node, x, "ND")]
        if node.op_type == "LayerNormalization":
            attrs["epsilon"] = float(node.attrs.get("epsilon", 1e-5))
            gamma = self.const(node, node.inputs[1]).reshape(-1)
            beta = self.const(node, node.inputs[2]).reshape(-1) if len(node.inputs) > 2 and node.inputs[2] else \
                np.zeros_like(gamma)
            ins += [self.weight(f"{node.name}.gamma", gamma.astype(np.float32)),
                    self.weight(f"{node.name}.beta", beta.astype(np.float32))]
        self.kernel(node, node.op_type, attrs, ins, "ND")

    def gelu(self, node: Node) -> None:
        """A GELU: the native op, or a decomposed chain matched by find_gelu_chains (node is its last op)."""
        x = self.patterns.gelu_input.get(node.name, node.inputs[0])
        dv = self.act(node, x, self.storage[self.device[x]].layout)
        if node.name in self.patterns.gelu_chain:
            node = Node(node.name, "Gelu", [x], node.outputs, {}, self.patterns.gelu_chain[node.name])
        self.kernel(node, "Gelu", {"shape": (prod(self.storage[dv].packed),), "activation": "", "bias": False},
                    [dv], self.storage[dv].layout)

    LOWER: ClassVar[dict] = {
        "Conv": conv, "Gemm": gemm, "MatMul": gemm, "Relu": eltwise, "Clip": eltwise, "Add": eltwise,
        "Mul": eltwise, "Div": eltwise, "Sub": eltwise, "MaxPool": pool, "GlobalAveragePool": pool,
        "Flatten": reshape, "Reshape": reshape, "Transpose": transpose, "Softmax": row_op,
        "LayerNormalization": row_op, "Gelu": gelu, "Attention": attention, "EltwiseProgram": eltwise_program}


    def layernorm_decomposed(self, node: Node) -> None:
        names, x, gamma, beta, eps = self.patterns.layernorm_chain[node.name]
        xs = self.shape(x)
        fused = Node(node.name, "LayerNormalization", [x], node.outputs, {"epsilon": eps}, names)
        ins = [self.act(node, x, "ND"), self.weight(f"{node.name}.gamma", gamma.astype(np.float32)),
               self.weight(f"{node.name}.beta", beta.astype(np.float32))]
        self.kernel(fused, "LayerNormalization", {"rows": prod(xs[:-1]), "length": xs[-1], "epsilon": eps,
                                                  "activation": "", "bias": False}, ins, "ND")

    def unsupported_nodes(self) -> list[Node]:
        """Nodes no rule lowers, after the patterns absorbed what they could."""
        return [n for n in self.g.nodes if n.op_type not in self.LOWER and n.op_type not in PROGRAM_CHAIN_OPS
                and not self.patterns.absorbed(n.name)]

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
        self.decisions.extend(self.patterns.decisions)
        unsupported = self.unsupported_nodes()
        if unsupported:
            lines = "; ".join(f"node '{n.name}' ({n.op_type})" for n in unsupported[:10])
            raise KilnError("lowering", self.model, f"no kernel yet for {len(unsupported)} node(s): {lines}. "
                            f"Lowered ops: {', '.join(sorted(self.LOWER))}")
        for n in g.nodes:
            if n.name in self.patterns.skip:
                continue
            if n.name in self.patterns.gelu_chain:
                self.gelu(n)
            elif n.name in self.patterns.layernorm_chain:
                self.layernorm_decomposed(n)
            else:
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
                            self.steps, self.storage, self.aliases, self.weights, self.decisions,
                            self.alias_offsets)


def lower(g: Graph, model: str, dtype: str = "fp16", patterns: Patterns | None = None) -> LoweredModel:
    """dtype: the Cube kernels' operand type (KILN_DTYPE), which their packed weights take; patterns: what
    find_patterns(g) found (found here when not given)."""
    return _Lowerer(g, model, dtype, patterns).run()


def unsupported_nodes(g: Graph, model: str) -> list[Node]:
    return _Lowerer(g, model).unsupported_nodes()
