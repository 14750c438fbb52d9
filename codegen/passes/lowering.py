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

from collections.abc import Callable
from dataclasses import replace
from math import prod
from typing import ClassVar

import numpy as np

from .. import KilnError
from ..frontend.onnx_rules import pool_pads
from ..ir import layouts
from ..ir.eltwise_program import encode
from ..ir.graph import Graph, Node, OpInstance
from ..ir.opspec import is_depthwise
from . import copy_rules, gather_rules, pad_rules, row_axis
from .aicpu_step import aicpu_step
from .channel_norm import lower_channel_layernorm
from .conv_transpose import conv_transpose
from .eltwise_programs import CHAIN_OPS as PROGRAM_CHAIN_OPS  # lowered as elementwise programs
from .lowered import LoweredModel, Step, Storage
from .patterns import Patterns, find_patterns
from .recurrent import gru_loop, lstm_loop
from .views import as_swap_0213, canonical_transpose, contiguous_offset

C0 = 16


GLOBAL_MAXPOOL_WINDOW = 2048  # map pixels a GlobalMaxPool runs as one MaxPool window (64 KiB of NC1HWC0 rows)


class _Lowerer:
    def __init__(self, g: Graph, model: str, dtype: str = "fp16", patterns: Patterns | None = None,
                 convt_chooser: Callable | None = None):
        self.g, self.model = g, model
        self.convt_chooser = convt_chooser  # ConvTranspose's form by the cost model (conv_transpose.py)
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

    def weight(self, name: str, arr: np.ndarray, masked_value_ok: bool = False) -> str:
        """A packed constant of the blob. The frontend refused non-finite initializers, so a non-finite packed
        value is an overflow of the packed type (fp16: |x| > 65504): stop, naming it (masked_value_ok: an additive
        attention mask, whose -inf is its "masked" value)."""
        arr = np.ascontiguousarray(arr)
        if arr.dtype.kind == "f":
            bad = ~np.isfinite(arr) & ~(masked_value_ok & np.isneginf(arr))
            if bad.any():
                node = name.rsplit(".", 1)[0]
                raise KilnError("lowering", f"weight '{name}' of node '{node}' of {self.model}",
                                f"{int(bad.sum())} of its {arr.size} values do not fit {arr.dtype} (beyond "
                                f"+-{float(np.finfo(arr.dtype).max):g} once folded and packed); kiln bakes only "
                                f"weights its device type holds: rescale the model's weights")
        self.weights[name] = arr
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
        if have == "ND" and layout == "NC1HWC0" and len(self.storage[dv].logical) == 4:
            return copy_rules.to_blocked(self, node, v, dv)
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
        if node.fused.program:  # an elementwise program epilogue (program_epilogue: depthwise convolutions only)
            attrs["program"] = node.fused.program
        c04 = x in self.device and self.storage[self.device[x]].layout == "NC1HWC0_C04"  # gather_rules.stage_input
        if c04:  # a small-channel image: Load3D's channelSize 4, the weights in its K order (tap * 4 + channel)
            attrs.update(self.cube_dtype(), c04=True)
            wname = self.weight(f"{node.name}.w", layouts.oihw_to_fractal_z_c04(w, self.dtype))
        elif group == 1:
            attrs.update(self.cube_dtype())
            wname = self.weight(f"{node.name}.w", layouts.oihw_to_fractal_z(w, self.dtype))
        elif is_depthwise(group, xs[1], w.shape):
            wname = self.weight(f"{node.name}.w", layouts.dw_weight_to_c1hwc0(w))
        else:  # grouped: the block-diagonal dense weight, each N tile reads its groups' rows (conv2d_grouped_cube)
            attrs.update(self.cube_dtype())
            wname = self.weight(f"{node.name}.w", layouts.oihw_to_fractal_z(layouts.grouped_to_dense(w, group),
                                                                             self.dtype))
        ins = [self.act(node, x, "NC1HWC0_C04" if c04 else "NC1HWC0"), wname]
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
        b = b.reshape(-1, 1) if b.ndim == 1 else b  # a 1-D MatMul B: one column (the same bytes as the result)
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
        if node.op_type == "Gemm" and (a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0):
            raise self.fail(node, "Gemm with alpha/beta != 1 is not supported yet")
        x = node.inputs[0]
        if node.op_type == "MatMul" and node.inputs[1] not in self.g.initializers:
            return self.batched_matmul(node)
        xs = self.shape(x)
        xs = (prod(xs[:-1]), xs[-1])  # leading dims flatten into M (1 for a 1-D A; 0-D refused by infer_matmul)
        src = self.act(node, x, "ND")
        if node.op_type == "Gemm" and a.get("transA", 0):  # A held as [K, M]: moved to [M, K] by a copy
            src, xs = f"{x}@perm_1_0", (xs[1], xs[0])  # isolate.py: x transposed
            if src not in self.storage:
                src = copy_rules.permuted(self, node, x, (1, 0), src, False)
        b, bias, node = self.gemm_operands(node)
        ins = [src, self.weight(f"{node.name}.w", layouts.kn_to_zn(b, self.dtype))]
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
        layout = self.storage[self.device[full[0]]].layout if full else \
            ("NC1HWC0" if len(out_shape) == 4 and "row" not in forms else "ND")  # an Expand has no full operand
        if len(out_shape) == 4 and any(f.startswith("channel") for f in forms):
            layout = "NC1HWC0"  # a per-channel operand is read as C0 blocks: row-major inputs are relaid out (act)
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
            return self.act(node, v, {"full": layout, "row": "ND", "scalar": "ND"}.get(form, "NC1HWC0"))
        c = np.asarray(self.g.initializers[v], np.float32)
        if form in ("row", "scalar"):
            packed = c.reshape(-1).astype(np.float16)
        elif form == "full":
            packed = layouts.nchw_to_nc1hwc0(c) if layout == "NC1HWC0" else c.astype(np.float16)
        else:  # [1 or N, C, 1, 1] -> (1 or N, C1, C0), zero in the padded channels
            c = c.reshape((1,) * (4 - c.ndim) + c.shape)
            packed = layouts.nchw_to_nc1hwc0(c)
        return self.weight(f"{node.name}.{v}", np.ascontiguousarray(packed.reshape(-1)))

    def pool(self, node: Node) -> None:
        x, a = node.inputs[0], node.attrs
        xs = self.shape(x)
        attrs: dict = {"input": xs, "activation": "", "bias": False}
        op_type = node.op_type
        if op_type == "GlobalMaxPool":
            if xs[2] * xs[3] > GLOBAL_MAXPOOL_WINDOW:  # the window's rows would not fit UB: rows of H*W, reduced
                return copy_rules.reduce(self, replace(node, op_type="ReduceMax", attrs={"axes": (2, 3),
                                                                                       "keepdims": 1}))
            op_type = "MaxPool"  # the whole map as one window: the max-pool kernel's computation
            a = {"kernel_shape": xs[2:], "strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1)}
            self.decisions.append(f"{node.name}: GlobalMaxPool is a MaxPool over the whole {xs[2]}x{xs[3]} map")
        if op_type in ("MaxPool", "AveragePool"):
            pads = pool_pads(a)
            attrs.update(kernel_shape=tuple(a["kernel_shape"]), strides=tuple(a["strides"]), pads=pads)
            if op_type == "MaxPool" and tuple(a.get("dilations", (1, 1))) != (1, 1):
                attrs["dilations"] = tuple(a["dilations"])
            if any(a.get("ceil_extra", (0, 0))):
                self.decisions.append(f"{node.name}: ceil_mode=1 gives {list(self.shape(node.outputs[0])[2:])}: "
                                      f"pads {list(a['pads'])} read as {list(pads)}, the extra taps "
                                      f"{'-inf (never the max)' if op_type == 'MaxPool' else 'never counted'}")
        if op_type == "AveragePool":
            if tuple(a["kernel_shape"]) == tuple(xs[2:]) and not any(pads):
                op_type = "GlobalAveragePool"  # the window is the whole map: the global kernel's computation
                self.decisions.append(f"{node.name}: AveragePool over the whole {xs[2]}x{xs[3]} map is a "
                                      f"GlobalAveragePool kernel")
            else:
                attrs.update(count_include_pad=int(a["count_include_pad"]),
                             ceil_extra=tuple(a.get("ceil_extra", (0, 0))))
        self.kernel(node, op_type, attrs, [self.act(node, x, "NC1HWC0")], "NC1HWC0")

    def reduce_mean(self, node: Node) -> None:
        """ReduceMean over H, W of a 4-D tensor is GlobalAveragePool's computation (its kernel); over the last
        axis of a 2-/3-D tensor it is a GEMM with a constant column of 1/L (fp32 accumulation on the Cube)."""
        x, axes, keep = node.inputs[0], tuple(node.attrs["axes"]), node.attrs["keepdims"]
        xs = self.shape(x)
        if not axes:  # noop_with_empty_axes=1 without axes: the identity
            return self.reshape(node)
        if len(xs) == 4 and axes == (2, 3):
            n, c = xs[:2]
            dv = self.new_value(f"{node.outputs[0]}@pooled", Storage("NC1HWC0", (n, c, 1, 1)))
            self.steps.append(Step("kernel", node.name, list(node.source) or [node.name], [node.op_type],
                                   [self.act(node, x, "NC1HWC0")], dv,
                                   instance=OpInstance(node.name, "GlobalAveragePool",
                                                       {"input": xs, "activation": "", "bias": False})))
            self.decisions.append(f"{node.name}: ReduceMean over H, W is a GlobalAveragePool kernel")
            self.device[node.outputs[0]] = dv if keep else self.view(node, self.act_of(node, dv, "ND"))
            return
        if len(xs) in (2, 3) and axes == (len(xs) - 1,):
            m, length = prod(xs[:-1]), xs[-1]
            column = np.full((length, 1), 1.0 / length, np.float32)
            dv = self.new_value(f"{node.outputs[0]}@rows", Storage("ND", (m, 1)))
            self.steps.append(Step("kernel", node.name, list(node.source) or [node.name], [node.op_type],
                                   [self.act(node, x, "ND"), self.weight(f"{node.name}.mean_column",
                                                                         layouts.kn_to_zn(column, self.dtype))],
                                   dv, instance=OpInstance(node.name, "Gemm", dict(
                                       a=(m, length), b=(length, 1), bias=False, activation="",
                                       **self.cube_dtype()))))
            self.decisions.append(f"{node.name}: ReduceMean over the last axis ({length}) is a GEMM with a "
                                  f"column of 1/{length}")
            self.device[node.outputs[0]] = self.view(node, dv)
            return
        copy_rules.reduce(self, node)  # any other axes: moved last by a copy, then the GEMM

    def reduce(self, node: Node) -> None:
        """ReduceSum (a GEMM with a column of ones), ReduceMax/Min/L2 (the reduce_vector kernel), the reduced axes
        moved last first; without axes (noop_with_empty_axes=1) the identity, a view."""
        return self.reshape(node) if not node.attrs["axes"] else copy_rules.reduce(self, node)

    def act_of(self, node: Node, dv: str, layout: str) -> str:
        """Device value dv in `layout` (act() for a value no IR name holds yet)."""
        self.device[f"{dv}@ir"] = dv
        return self.act(node, f"{dv}@ir", layout)

    def view(self, node: Node, dv: str) -> str:
        """The node's output as an ND view of device value dv (same bytes, the output's shape)."""
        v = node.outputs[0]
        return self.new_value(v, Storage("ND", self.shape(v)), alias_of=dv)

    def batchnorm(self, node: Node) -> None:
        """A BatchNormalization no Conv absorbed (see fold_batchnorm): y = x * s + t per channel, with
        s = gamma / sqrt(var + eps), t = beta - mean * s: a depthwise 1x1 convolution with weight s and bias t
        (the dwconv2d_vector kernel) on NCHW, and on (N, C) with C a multiple of 16, whose bytes are those of
        NC1HWC0 (N, C, 1, 1); on other (N, C) a GEMM with diag(s) and bias t."""
        x, xs = node.inputs[0], self.shape(node.inputs[0])
        gamma, beta, mean, var = (self.const(node, node.inputs[i]).astype(np.float64) for i in range(1, 5))
        scale = gamma / np.sqrt(var + float(node.attrs["epsilon"]))
        shift = layouts.pad_bias((beta - mean * scale).astype(np.float32))
        c = int(scale.size)
        if len(xs) == 4 or (len(xs) == 2 and c % C0 == 0):
            shape4 = (xs[0], c, *xs[2:]) if len(xs) == 4 else (xs[0], c, 1, 1)
            src = self.act(node, x, "NC1HWC0" if len(xs) == 4 else "ND")
            if len(xs) == 2:  # (N, C1, 1, 1, 16) is byte-identical to (N, C)
                src = self.new_value(f"{src}@nc1hwc0", Storage("NC1HWC0", shape4), alias_of=src)
            w = self.weight(f"{node.name}.scale", layouts.dw_weight_to_c1hwc0(scale.astype(np.float32).reshape(
                c, 1, 1, 1)))
            out = self.new_value(f"{node.outputs[0]}@affine", Storage("NC1HWC0", shape4))
            attrs = dict(input=shape4, weight=(c, 1, 1, 1), strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1),
                         group=c, bias=True, **self.epilogue(node))
            self.steps.append(Step("kernel", node.name, list(node.source) or [node.name], [node.op_type],
                                   [src, w, self.weight(f"{node.name}.shift", shift)], out,
                                   instance=OpInstance(node.name, "Conv", attrs)))
            self.device[node.outputs[0]] = out if len(xs) == 4 else self.view(node, out)
            self.decisions.append(f"{node.name}: standalone BatchNormalization over {c} channels is a per-channel "
                                  f"scale and shift: a depthwise 1x1 convolution kernel")
            return
        if len(xs) == 2:
            ins = [self.act(node, x, "ND"), self.weight(f"{node.name}.scale",
                                                        layouts.kn_to_zn(np.diag(scale).astype(np.float32),
                                                                         self.dtype)),
                   self.weight(f"{node.name}.shift", shift)]
            self.decisions.append(f"{node.name}: standalone BatchNormalization of (N, {c}), C not a multiple of 16, "
                                  f"is a per-column scale and shift: a GEMM with diag(scale), the shift as its bias")
            self.kernel(node, "Gemm", dict(a=xs, b=(c, c), bias=True, **self.epilogue(node), **self.cube_dtype()),
                        ins, "ND")
            return
        raise self.fail(node, f"standalone BatchNormalization of a {len(xs)}-D input {list(xs)}: only 4-D NCHW "
                              f"and 2-D (N, C) are supported")

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
            ins.append(self.weight(f"{node.name}.mask", self.const(node, m).reshape(b, kv).astype(np.float16),
                                   masked_value_ok=True)
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
            return self.transpose_canonical(node)
        self.kernel(node, "Transpose0213", {"input": xs, "activation": "", "bias": False}, [self.act(node, x, "ND")],
                    "ND")

    def transpose_canonical(self, node: Node) -> None:
        """Any permutation in its simplest form (unit axes dropped, neighbouring axes merged): none left is a view;
        a swap of two neighbouring axis groups is the (0,2,1,3) transpose kernel on the merged dims."""
        x, perm = node.inputs[0], tuple(node.attrs["perm"])
        xs = self.shape(x)
        dims, canon = canonical_transpose(xs, perm)
        if canon == tuple(range(len(canon))):
            self.decisions.append(f"{node.name}: Transpose perm {list(perm)} of {list(xs)} moves only unit axes")
            return self.reshape(node)
        swap = as_swap_0213(dims, canon)
        if swap is None or copy_rules.blocked_transpose_wanted(self, node):  # the general copy kernel
            return copy_rules.transpose(self, node)
        self.decisions.append(f"{node.name}: Transpose perm {list(perm)} of {list(xs)} is perm {list(canon)} of "
                              f"{list(dims)}: the (0,2,1,3) kernel on {list(swap)}")
        self.kernel(node, "Transpose0213", {"input": swap, "activation": "", "bias": False},
                    [self.act(node, x, "ND")], "ND")

    def slice_view(self, node: Node, out: str, begin: tuple[int, ...], end: tuple[int, ...]) -> None:
        """Output `out` of `node` as the bytes [begin, end) of its input: an NC1HWC0 channel slice at C0-aligned
        channels of a single image, or a contiguous range of a row-major value. Anything else is refused."""
        x = node.inputs[0]
        xs, dv = self.shape(x), self.device[x]
        shape = tuple(e - b for b, e in zip(begin, end))
        st = self.storage[dv]
        if st.layout == "NC1HWC0" and len(shape) == 4:
            c, h, w = xs[1:]
            if shape[0] == 1 and shape[2:] == (h, w) and begin[1] % C0 == 0 and (end[1] % C0 == 0 or end[1] == c):
                offset = (begin[0] * st.packed[1] + begin[1] // C0) * h * w * C0 * 2
                self.device[out] = self.new_value(out, Storage("NC1HWC0", shape), alias_of=dv, offset=offset)
                self.decisions.append(f"{node.name}: channels {begin[1]}..{end[1]} of {x} are a view (C0-aligned)")
                return
            if shape[0] == xs[0] and shape[2:] == (h, w):
                return self.channel_gather(node, [(x, c) for c in range(begin[1], end[1])], out, "unaligned slice")
        src = self.act(node, x, "ND") if st.layout == "NC1HWC0" else dv
        contiguous = contiguous_offset(xs, begin, end)
        if contiguous is None:
            raise self.fail(node, f"the slice {list(zip(begin, end))} of {list(xs)} is not one contiguous range "
                                  f"and no copy kernel moves it yet")
        self.device[out] = self.new_value(out, Storage("ND", shape), alias_of=src, offset=contiguous * 2)
        self.decisions.append(f"{node.name}: {out} is a contiguous range of {x}: a view")

    def slice_op(self, node: Node) -> None:
        self.slice_view(node, node.outputs[0], tuple(node.attrs["begin"]), tuple(node.attrs["end"]))

    def split(self, node: Node) -> None:
        xs, axis, start = self.shape(node.inputs[0]), node.attrs["axis"], 0
        for out, size in zip(node.outputs, node.attrs["sizes"]):
            begin = tuple(start if i == axis else 0 for i in range(len(xs)))
            end = tuple(start + size if i == axis else d for i, d in enumerate(xs))
            if out:
                self.slice_view(node, out, begin, end)
            start += size

    def gather(self, node: Node) -> None:
        """A constant scalar index: the slice [index, index + 1) of the axis with that axis dropped."""
        xs, axis, index = self.shape(node.inputs[0]), node.attrs["axis"], node.attrs["index"]
        begin = tuple(index if i == axis else 0 for i in range(len(xs)))
        end = tuple(index + 1 if i == axis else d for i, d in enumerate(xs))
        out = node.outputs[0]
        src = self.device[node.inputs[0]]
        if self.storage[src].layout == "NC1HWC0":
            src = self.act(node, node.inputs[0], "ND")
        offset = contiguous_offset(xs, begin, end)
        if offset is None:
            raise self.fail(node, f"index {index} of axis {axis} of {list(xs)} is not one contiguous range and no "
                                  f"copy kernel moves it yet")
        self.device[out] = self.new_value(out, Storage("ND", self.shape(out)), alias_of=src, offset=offset * 2)
        self.decisions.append(f"{node.name}: index {index} of axis {axis} of {node.inputs[0]} is a view")

    def channel_gather(self, node: Node, sources: list[tuple[str, int]], out: str = "", why: str = "") -> None:
        ins, out = list(dict.fromkeys(v for v, _ in sources)), out or node.outputs[0]
        self.decisions += [f"{node.name}: {why}: a channel_gather copy kernel"] if why else []
        n, _, h, w = self.shape(ins[0])
        attrs = {"n": n, "h": h, "w": w, "in_channels": ",".join(str(self.shape(v)[1]) for v in ins),
                 "table": ",".join(f"{ins.index(v)}:{c}" for v, c in sources), "activation": "", "bias": False}
        self.device[out] = self.new_value(out, Storage("NC1HWC0", (n, len(sources), h, w)))
        name = node.name if out == node.outputs[0] else f"{node.name}/{out}"  # a Split: one kernel per output
        self.steps.append(Step("kernel", name, list(node.source) or [node.name], [node.op_type],
                               [self.act(node, v, "NC1HWC0") for v in ins], out,
                               instance=OpInstance(name, "ChannelGather", attrs)))

    def concat(self, node: Node) -> None:
        """Concat with no copy: each input's producer writes its own sub-range of the output (the memory plan
        places the output; the inputs are views of it). Needs each input's range contiguous: row-major with a
        single outer index, or NC1HWC0 channels of one image at C0-aligned offsets."""
        ins, axis, out = [i for i in node.inputs if i], node.attrs["axis"], node.outputs[0]
        if len(ins) == 1:  # the input itself (DenseNet's first layer): a view in its own layout
            return copy_rules.same_bytes(self, node, ins[0])
        shape = self.shape(out)
        layouts_in = {self.storage[self.device[v]].layout for v in ins if v in self.device}
        layout = "NC1HWC0" if layouts_in == {"NC1HWC0"} and len(shape) == 4 and set(ins) <= set(self.device) else "ND"
        plan, why = self.concat_offsets(node, ins, axis, layout)
        if why and layout == "NC1HWC0" and axis in (1, -3) and any(self.shape(v)[1] % C0 for v in ins[:-1]):
            return self.channel_gather(node, [(v, c) for v in ins for c in range(self.shape(v)[1])], why=why)
        if why:  # a copy kernel: any axis, any layout
            return copy_rules.concat(self, node, ins, axis, layout, why)
        self.device[out] = self.new_value(out, Storage(layout, shape))
        for dv, offset in plan:
            copy_rules.attach(self, dv, out, offset)
        self.decisions.append(f"{node.name}: Concat in place: {[dv for dv, _ in plan]} are {layout} sub-ranges "
                              f"of {out} at byte offsets {[o for _, o in plan]}")

    def concat_offsets(self, node: Node, ins: list[str], axis: int, layout: str) -> tuple[list[tuple[str, int]], str]:
        """(device value, byte offset) to place in the concat output (copy_rules.inplace_plan), or the reason the
        inputs cannot be views."""
        shape = self.shape(node.outputs[0])
        if layout == "NC1HWC0" and axis == 0:  # whole images, one after another
            image = prod(self.storage[self.device[ins[0]]].packed[1:]) * 2
            offsets = [sum(self.shape(v)[0] for v in ins[:i]) * image for i in range(len(ins))]
        elif layout == "NC1HWC0":
            n, _, h, w = shape
            if axis != 1 or n != 1:
                return [], f"NC1HWC0 inputs join in place only along images or channels of one image (axis {axis}, " \
                           f"batch {n})"
            unaligned = [self.shape(v)[1] for v in ins[:-1] if self.shape(v)[1] % C0]
            if unaligned:
                return [], f"channel counts {unaligned} are not multiples of C0={C0}"
            starts = [sum(self.shape(v)[1] for v in ins[:i]) for i in range(len(ins))]
            offsets = [s // C0 * h * w * C0 * 2 for s in starts]
        else:
            if prod(shape[:axis]) != 1:
                return [], f"the row-major inputs interleave (dims {list(shape[:axis])} before the axis)"
            inner = prod(shape[axis + 1:])
            offsets = [sum(self.shape(v)[axis] for v in ins[:i]) * inner * 2 for i in range(len(ins))]
        return copy_rules.inplace_plan(self, ins, offsets, layout)

    def row_op(self, node: Node) -> None:
        x = node.inputs[0]
        xs = self.shape(x)
        axis = node.attrs.get("axis", -1)
        if axis not in (-1, len(xs) - 1):  # Softmax, LogSoftmax: the axis moved last and back
            return row_axis.moved_row_op(self, node)
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

    def resize(self, node: Node) -> None:
        """Resize of H and W (the frontend normalised it: sizes, float32 scales, modes): the resize_vector kernel,
        with the elementwise program after it as its epilogue where program_epilogue.py took one."""
        a, x = node.attrs, node.inputs[0]
        attrs = {"input": self.shape(x), "out_hw": tuple(a["out_hw"]), "mode": a["mode"], "coord": a["coord"],
                 "nearest": a["nearest"], "scales": tuple(a["scales"]), "activation": "", "bias": False}
        if node.fused.program:
            attrs["program"] = node.fused.program
        self.kernel(node, "Resize", attrs, [self.act(node, x, "NC1HWC0")], "NC1HWC0")
        self.decisions.append(f"{node.name}: Resize ({a['mode']}, {a['coord']}) is a resize_vector kernel"
                              + (f" with the program epilogue {node.fused.program}" if node.fused.program else ""))

    LOWER: ClassVar[dict] = {
        "Conv": conv, "Gemm": gemm, "MatMul": gemm, "Relu": eltwise, "Clip": eltwise, "Add": eltwise,
        "Mul": eltwise, "Div": eltwise, "Sub": eltwise, "MaxPool": pool, "GlobalAveragePool": pool,
        "GlobalMaxPool": pool, "Flatten": reshape, "Reshape": reshape, "Transpose": transpose, "Softmax": row_op,
        "LogSoftmax": row_op, "LayerNormalization": row_op, "Gelu": gelu, "Attention": attention,
        "AveragePool": pool, "ReduceMean": reduce_mean, "BatchNormalization": batchnorm, "Squeeze": reshape,
        "Unsqueeze": reshape, "Slice": slice_op, "Split": split, "Gather": gather_rules.gather, "Concat": concat,
        "EltwiseProgram": eltwise_program, "Resize": resize, "ConvTranspose": conv_transpose, "Pad": pad_rules.pad,
        "LSTMLoop": lstm_loop, "GRULoop": gru_loop, **dict.fromkeys(("ReduceSum", *copy_rules.REDUCE_TYPES), reduce),
        "ChannelLayerNorm": lower_channel_layernorm}


    def layernorm_decomposed(self, node: Node) -> None:
        names, x, gamma, beta, eps = self.patterns.layernorm_chain[node.name]
        xs = self.shape(x)
        fused = Node(node.name, "LayerNormalization", [x], node.outputs, {"epsilon": eps}, names)
        ins = [self.act(node, x, "ND"), self.weight(f"{node.name}.gamma", gamma.astype(np.float32)),
               self.weight(f"{node.name}.beta", beta.astype(np.float32))]
        self.kernel(fused, "LayerNormalization", {"rows": prod(xs[:-1]), "length": xs[-1], "epsilon": eps,
                                                  "activation": "", "bias": False}, ins, "ND")

    def unsupported_nodes(self) -> list[Node]:
        """Nodes no rule lowers, after the patterns absorbed what they could (AI CPU nodes are lowered)."""
        return [n for n in self.g.nodes if n.op_type not in self.LOWER and n.op_type not in PROGRAM_CHAIN_OPS
                and not self.patterns.absorbed(n.name) and n.name not in self.g.aicpu]

    def run(self) -> LoweredModel:
        g = self.g
        for v in g.inputs:
            gather_rules.stage_input(self, v)
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
            elif n.name in self.patterns.channel_shuffle:  # one permutation (patterns.py logged it)
                self.channel_gather(n, self.patterns.shuffle_sources(n.name))
            elif n.name in g.aicpu:
                aicpu_step(self, n)
            elif n.op_type in self.LOWER:
                self.LOWER[n.op_type](self, n)
            else:  # a chain op (PROGRAM_CHAIN_OPS) that no elementwise program took: the pipeline forms them first
                raise self.fail(n, "lowers only inside an elementwise program (codegen/passes/eltwise_programs.py), "
                                   "and none was formed for it")
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
                            self.steps, self.storage, self.aliases, self.weights, self.decisions, self.alias_offsets)


def lower(g: Graph, model: str, dtype: str = "fp16", patterns: Patterns | None = None,
          convt_chooser: Callable | None = None) -> LoweredModel:
    """dtype: the Cube kernels' operand type (KILN_DTYPE), which their packed weights take; patterns: what
    find_patterns(g) found (found here when not given); convt_chooser: picks a ConvTranspose's form
    (codegen/select/conv_transpose.py; None: stride_phase)."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow on packing is checked (and named) by weight()
        return _Lowerer(g, model, dtype, patterns, convt_chooser).run()


def unsupported_nodes(g: Graph, model: str) -> list[Node]:
    return _Lowerer(g, model).unsupported_nodes()
