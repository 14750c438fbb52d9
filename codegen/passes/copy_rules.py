"""Lowering rules that move bytes with the copy_mte kernel (codegen/ir/copy_spec.py), and the in-place plan of
a Concat whose inputs are earlier Concats' members (DenseNet): functions of the lowerer (codegen/passes/lowering.py
calls them; it is at its size limit). A Transpose of any permutation, a Concat that cannot be views, the
reductions over any axes (their reduced axes moved last, then a GEMM with a column or the reduce_vector kernel)."""
from __future__ import annotations

from math import prod

import numpy as np

from ..ir import layouts
from ..ir.copy_spec import CopySpec, concat_copy, format_moves, parse_moves
from ..ir.graph import Node, OpInstance
from ..ir.reduce_spec import MAX_LENGTH, REDUCE_OPS
from .lowered import LowererState, Step, Storage
from .views import blocked_transpose

C0 = 16
REDUCE_TYPES = tuple(REDUCE_OPS)  # ReduceMax, ReduceMin, ReduceL2 (reduce_vector); ReduceSum: the GEMM
# ops whose kernels read a 4-D activation as NC1HWC0: a Transpose feeding one writes that layout when it can
BLOCKED_CONSUMERS = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization",
                     "Resize"}


def copy_step(lw: LowererState, node: Node, spec: CopySpec, ins: list[str], out: str, name: str = "") -> None:
    lw.steps.append(Step("kernel", name or node.name, list(node.source) or [node.name], [node.op_type], ins, out,
                         instance=OpInstance(name or node.name, "Copy", {"out_numel": spec.out_numel,
                                                                         "moves": spec.moves, "activation": "",
                                                                         "bias": False})))


def permuted(lw: LowererState, node: Node, x: str, perm: tuple[int, ...], out: str, out_blocked: bool) -> str:
    """Device value `out` holding IR value x transposed by `perm` (NC1HWC0 when out_blocked, else row-major): a
    copy_mte kernel reading x's stored bytes (NC1HWC0 ones directly when its channels are whole C0 blocks), or a
    view when the permutation moves no byte."""
    xs, dv = lw.shape(x), lw.device[x]
    in_blocked = lw.storage[dv].layout == "NC1HWC0" and xs[1] % C0 == 0
    src = dv if in_blocked else lw.act(node, x, "ND")
    dims, strides = blocked_transpose(xs, perm, in_blocked, out_blocked)
    shape = tuple(xs[a] for a in perm)
    st = Storage("NC1HWC0" if out_blocked else "ND", shape)
    move = parse_moves(format_moves([(dims, strides, 0)]))[0]
    if move.strides[-1] == 1 and move.dims[-1] == move.numel:  # one contiguous run in order: the same bytes
        lw.decisions.append(f"{node.name}: perm {list(perm)} of {list(xs)} keeps every byte in place: a view")
        return lw.new_value(out, st, alias_of=src)
    spec = CopySpec(move.numel, format_moves([(dims, strides, 0)]))
    lw.new_value(out, st)
    copy_step(lw, node, spec, [src], out)
    lw.decisions.append(f"{node.name}: perm {list(perm)} of {list(xs)} ({'NC1HWC0' if in_blocked else 'ND'} in, "
                        f"{st.layout} out) is the move {spec.moves}: a copy_mte kernel")
    return out


def to_blocked(lw: LowererState, node: Node, v: str, dv: str) -> str:
    """IR value v, held row-major (NCHW) in device value dv, as NC1HWC0 for `node` (a Conv or pool reading a
    Transpose's or Reshape's 4-D result whose channels are not whole C0 blocks, which no copy move can split):
    a host relayout step, the padded channel lanes zero, as the graph input's staging writes them."""
    n, c, h, w = lw.storage[dv].logical
    out = lw.new_value(f"{dv}@nc1hwc0", Storage("NC1HWC0", (n, c, h, w)))
    lw.steps.append(Step("glue", f"{node.name}.relayout", [node.name], ["Relayout"], [dv], out,
                         glue="to_nc1hwc0", params=[n, c, h, w]))
    lw.decisions.append(f"{node.name}: {v} is held as rows (N, C, H, W) = {[n, c, h, w]}; {node.op_type} reads "
                        f"NC1HWC0: a host relayout (C={c} is not whole C0 blocks, the padded lanes are zeros)")
    return out


def blocked_out(lw: LowererState, node: Node) -> bool:
    """The Transpose's 4-D result, of whole C0 blocks of channels, has a consumer that reads NC1HWC0."""
    v = node.outputs[0]
    shape = lw.shape(v)
    return len(shape) == 4 and shape[1] % C0 == 0 and any(
        v in n.inputs for n in lw.g.nodes if n.op_type in BLOCKED_CONSUMERS)


def blocked_transpose_wanted(lw: LowererState, node: Node) -> bool:
    """A swap of two axis groups goes to copy_mte too when it reads or writes NC1HWC0 bytes as they are held."""
    x = node.inputs[0]
    blocked_in = lw.storage[lw.device[x]].layout == "NC1HWC0" and lw.shape(x)[1] % C0 == 0
    return blocked_in or blocked_out(lw, node)


def transpose(lw: LowererState, node: Node) -> None:
    """A Transpose that is not a swap of two axis groups (or touches NC1HWC0 bytes): one copy_mte kernel. A 4-D
    result with whole C0 blocks of channels is written as NC1HWC0 when a consumer reads that layout (a Conv after
    NHWC -> NCHW)."""
    v = node.outputs[0]
    lw.device[v] = permuted(lw, node, node.inputs[0], tuple(node.attrs["perm"]), v, blocked_out(lw, node))


def concat(lw: LowererState, node: Node, ins: list[str], axis: int, layout: str, why: str) -> None:
    """A Concat whose inputs cannot be views of the result (`why`): one copy_mte kernel, over the NC1HWC0 stored
    bytes (images, H or W; channels of whole C0 blocks) or row-major."""
    out, shape = node.outputs[0], lw.shape(node.outputs[0])
    consts = {v: np.asarray(lw.g.initializers[v], np.float32) for v in ins if v in lw.g.initializers}
    aligned = all(lw.shape(v)[1] % C0 == 0 for v in ins[:-1])
    if layout == "NC1HWC0" and not consts and (axis != 1 or aligned):
        dev = [lw.act(node, v, "NC1HWC0") for v in ins]
        spec = concat_copy([lw.storage[d].packed for d in dev], axis)
    else:  # a constant input (ViT's class token) is read from the weights blob, row-major fp16 like the others
        layout = "ND"
        dev = [lw.weight(f"{node.name}.{v}", consts[v].astype(np.float16).reshape(-1)) if v in consts
               else lw.act(node, v, "ND") for v in ins]
        spec = concat_copy([consts[v].shape if v in consts else lw.shape(v) for v in ins], axis)
    lw.device[out] = lw.new_value(out, Storage(layout, shape))
    copy_step(lw, node, spec, dev, out)
    lw.decisions.append(f"{node.name}: Concat along axis {axis} copies ({why}): a copy_mte kernel over {layout}")


def same_bytes(lw: LowererState, node: Node, x: str) -> None:
    """The node's output is its input x, held as x is (a Concat of one input)."""
    dv, out = lw.device[x], node.outputs[0]
    lw.device[out] = lw.new_value(out, Storage(lw.storage[dv].layout, lw.shape(out)), alias_of=dv)
    lw.decisions.append(f"{node.name}: {node.op_type} of one input is a view of {dv}")


def attach(lw: LowererState, dv: str, root: str, offset: int) -> None:
    """Device value dv (and every view of it) becomes the bytes of `root` from `offset` on."""
    for k, r in list(lw.aliases.items()):
        if r == dv:
            lw.aliases[k] = root
            lw.alias_offsets[k] = lw.alias_offsets.get(k, 0) + offset
    lw.aliases[dv] = root
    if offset:
        lw.alias_offsets[dv] = offset


def members(lw: LowererState, root: str) -> list[str]:
    """The step outputs an in-place Concat result `root` is made of, by offset."""
    producers = {s.output for s in lw.steps}
    found = [k for k, r in lw.aliases.items() if r == root and k in producers]
    return sorted(found, key=lambda k: lw.alias_offsets.get(k, 0))


def inplace_plan(lw: LowererState, ins: list[str], offsets: list[int],
                 layout: str) -> tuple[list[tuple[str, int]], str]:
    """(device value, byte offset) to attach to the Concat result per run of inputs, or the reason it cannot be in
    place. An input is a step's output (it writes its own range), or an earlier in-place Concat's result, or the
    first of that result's members when the next inputs are exactly its other members at the same relative
    offsets (DenseNet: each layer's Concat holds the previous one's inputs and one more): that result moves in
    whole."""
    producers = {s.output for s in lw.steps}
    plan, i = [], 0
    while i < len(ins):
        dv = lw.device.get(ins[i])
        if dv is None or lw.storage[dv].layout != layout or ins.count(ins[i]) > 1:
            return [], f"input {ins[i]} is not the {layout} output of a step that can write into the result"
        root = lw.aliases.get(dv)
        if root is None and (dv in producers or members(lw, dv)):
            plan.append((dv, offsets[i]))
            i += 1
            continue
        run = members(lw, root) if root and root not in producers and root not in lw.aliases else []
        got = [lw.device.get(v) for v in ins[i:i + len(run)]]
        rel = [lw.alias_offsets.get(m, 0) for m in run]
        covered = sum(lw.storage[m].nbytes for m in run) == lw.storage[root].nbytes if run and root else False
        if not run or got != run or rel[0] or covered is False or \
                [o - offsets[i] for o in offsets[i:i + len(run)]] != rel:
            return [], f"input {ins[i]} is a view of {root} that is not an earlier Concat's matching member"
        plan.append((str(root), offsets[i]))
        i += len(run)
    return plan, ""


def reduce(lw: LowererState, node: Node) -> None:
    """ReduceMean/Sum/Max/Min/L2 over any axes: the kept axes first and the reduced ones last (a copy_mte kernel, or
    a view when they already are), then per row of [kept, reduced]: Mean and Sum a GEMM with a column of 1/L or of
    ones (fp32 accumulation on the Cube), Max, Min and L2 the reduce_vector kernel; the result, with or without the
    unit axes, is a view of the (rows, 1) column."""
    x, axes, op = node.inputs[0], tuple(node.attrs["axes"]), node.op_type
    xs = lw.shape(x)
    kept = tuple(a for a in range(len(xs)) if a not in axes)
    rows, length = prod(xs[a] for a in kept), prod(xs[a] for a in axes)
    if op == "ReduceMean" and length > 2 ** 14 and lw.dtype == "fp16":
        raise lw.fail(node, f"ReduceMean over {length} values (axes {list(axes)} of {list(xs)}): 1/{length} is "
                            f"below fp16's normal range, so the mean's weight column would lose precision; "
                            f"supported: at most 16384 reduced values")
    if op in REDUCE_TYPES and length > MAX_LENGTH:
        raise lw.fail(node, f"{op} over {length} values (axes {list(axes)} of {list(xs)}): the reduce_vector kernel "
                            f"takes rows of at most {MAX_LENGTH} values")
    moved = f"{x}@perm_{'_'.join(map(str, kept + axes))}"  # isolate.py: x transposed by that permutation
    if moved not in lw.storage:  # another reduction over the same axes of x reuses the moved copy
        moved = permuted(lw, node, x, kept + axes, moved, False)
    flat = lw.new_value(f"{moved}@rows", Storage("ND", (rows, length)), alias_of=moved)
    dv = lw.new_value(f"{node.outputs[0]}@rows", Storage("ND", (rows, 1)))  # isolate.py: the same values
    if op in REDUCE_TYPES:
        lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], [op], [flat], dv,
                             instance=OpInstance(node.name, op, {"rows": rows, "length": length, "activation": "",
                                                                 "bias": False})))
        how = "the reduce_vector kernel"
    else:
        mean = op == "ReduceMean"
        column = np.full((length, 1), 1.0 / length if mean else 1.0, np.float32)
        lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], [op],
                             [flat, lw.weight(f"{node.name}.{'mean' if mean else 'sum'}_column",
                                              layouts.kn_to_zn(column, lw.dtype))], dv,
                             instance=OpInstance(node.name, "Gemm", dict(a=(rows, length), b=(length, 1), bias=False,
                                                                         activation="", **lw.cube_dtype()))))
        how = f"a GEMM [{rows}, {length}] x a column of {f'1/{length}' if mean else 'ones'}"
    lw.decisions.append(f"{node.name}: {op} over axes {list(axes)} of {list(xs)}: reduced axes last, then {how}")
    lw.device[node.outputs[0]] = lw.view(node, dv)
