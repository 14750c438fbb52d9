"""torch.nn.MultiheadAttention as torch.onnx.export writes it (torchvision's ViT, nn.TransformerEncoderLayer), put
in the form the attention fusion takes, and the GEMM epilogues transformer exports offer that no kernel takes yet.

The export projects Q, K and V with one packed GEMM ([S, B, 3D] = x . W_in + b_in) and splits the result with
pure data movement: Reshape [S, B, 3, D], Unsqueeze, Transpose (3, 1, 2, 0, 4), Squeeze, a Gather per Q/K/V,
then per head Reshape [S, B*H, hd], Transpose (1, 0, 2), Reshape [B, H, S, hd] (and K^T by Transpose (0, 1, 3, 2));
it scales both Q and K^T by sqrt(1/sqrt(hd)) before Q.K^T. Four to five transpose launches and two scale
launches per layer, and the attention fusion sees no scale after Q.K^T. The rewrite (fusion, so only with
ENABLE_FUSION=ON) finds the Q, K^T and V of an attention chain (MatMul -> Softmax(last axis) -> MatMul) by
evaluating their movement chains on element indices, so any order of those ops is recognised: where Q, K and V
are heads of one projection P ([S, B, 3, H, hd] or [B, S, 3, H, hd]), one Transpose of P to [3, B, H, S, hd]
replaces the chains and Q, K, V are its contiguous slices; the two scales become one Mul by their product after
Q.K^T (exact in real arithmetic: (c1 Q)(c2 K)^T = c1 c2 Q K^T), which the attention fusion then absorbs."""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.optlog import OptLog
from .views import canonical_transpose

MOVES = ("Reshape", "Unsqueeze", "Squeeze", "Transpose", "Gather", "Identity", "Flatten")
# the layouts of the packed projection the heads are cut from, and the perm to [3, B, H, S, hd]
LAYOUTS = {"seq_first": (2, 1, 3, 0, 4), "batch_first": (2, 0, 3, 1, 4)}


def scalar_factor(g: Graph, node: Node | None) -> tuple[str, float] | None:
    """(the tensor operand, the factor) of a Mul by a scalar constant or a Div of a tensor by one."""
    if node is None or node.op_type not in ("Mul", "Div") or len([i for i in node.inputs if i]) != 2:
        return None
    consts = [i for i in node.inputs if i in g.initializers and g.initializers[i].size == 1]
    if len(consts) != 1 or (node.op_type == "Div" and consts[0] != node.inputs[1]):
        return None
    c = float(np.asarray(g.initializers[consts[0]]).reshape(-1)[0])
    if node.op_type == "Div" and c == 0.0:
        return None
    return next(i for i in node.inputs if i != consts[0]), (1.0 / c if node.op_type == "Div" else c)


class _Index:
    """Readers and producers of the graph's values, and its outputs."""

    def __init__(self, g: Graph):
        self.producer = {o: n for n in g.nodes for o in n.outputs}
        self.readers: dict[str, list[Node]] = {}
        for n in g.nodes:
            for i in n.inputs:
                if i:
                    self.readers.setdefault(i, []).append(n)
        self.outputs = {v.name for v in g.outputs}

    def only_reader(self, value: str) -> Node | None:
        rs = self.readers.get(value, [])
        return rs[0] if len(rs) == 1 and value not in self.outputs else None


def _movement_chain(g: Graph, ix: _Index, value: str) -> tuple[str, list[Node]]:
    """(the value `value` is moved from, the data-movement nodes between them, first to last)."""
    chain: list[Node] = []
    while True:
        n = ix.producer.get(value)
        ins = [i for i in n.inputs if i and i not in g.initializers] if n is not None else []
        if n is None or n.op_type not in MOVES or len(ins) != 1 or (n.op_type == "Gather" and "index" not in n.attrs):
            return value, chain
        chain.insert(0, n)
        value = ins[0]


def _moved_indices(g: Graph, source: str, chain: list[Node]) -> np.ndarray:
    """The element indices of `source` that the chain's result holds, in the result's shape."""
    a = np.arange(prod(g.values[source].shape)).reshape(g.values[source].shape)
    for n in chain:
        if n.op_type == "Transpose":
            a = np.transpose(a, n.attrs["perm"])
        elif n.op_type == "Gather":
            a = np.take(a, n.attrs["index"], axis=n.attrs["axis"])
        a = a.reshape(g.values[n.outputs[0]].shape)  # Reshape, Unsqueeze, Squeeze, Flatten, Identity: a view
    return a


@dataclass
class _Match:
    """An attention chain whose Q, K^T and V are heads of one packed projection."""
    qk: Node
    pv: Node
    ops: dict[str, tuple[str, Node | None]]  # "q", "kt", "v" -> (the unscaled operand, its scale node or None)
    source: str                              # the packed projection
    layout: str                              # a key of LAYOUTS
    dims: tuple[int, int, int, int]          # batch, heads, seq, head_dim
    scale: float                             # the product of the scales on Q and K^T
    chains: list[Node]                       # the movement nodes from the projection to Q, K^T and V


def _match(g: Graph, ix: _Index, qk: Node) -> _Match | None:
    """qk = MatMul(Q [*c1], K^T [*c2]) read by a Softmax over its last axis whose result a MatMul multiplies by V,
    with Q, K^T and V heads of one projection; None otherwise."""
    sm = ix.only_reader(qk.outputs[0])
    if scalar_factor(g, sm) is not None:  # a scale after Q.K^T stays where it is
        sm = ix.only_reader(sm.outputs[0]) if sm is not None else None
    if sm is None or sm.op_type != "Softmax" or sm.attrs.get("axis", -1) not in (-1, 3):
        return None
    pv = ix.only_reader(sm.outputs[0])
    if pv is None or pv.op_type != "MatMul" or pv.inputs[0] != sm.outputs[0] or len(g.values[qk.outputs[0]].shape) != 4:
        return None
    ops: dict[str, tuple[str, Node | None]] = {}
    scale = 1.0
    for key, v in (("q", qk.inputs[0]), ("kt", qk.inputs[1])):
        sc = scalar_factor(g, ix.producer.get(v))
        if sc is not None and ix.only_reader(v) is qk:
            ops[key], scale = (sc[0], ix.producer[v]), scale * sc[1]
        else:
            ops[key] = (v, None)
    ops["v"] = (pv.inputs[1], None)
    found = {k: _movement_chain(g, ix, v) for k, (v, _) in ops.items()}
    sources = {s for s, _ in found.values()}
    if len(sources) != 1 or any(not c for _, c in found.values()):
        return None
    source = sources.pop()
    b, h, s, d = g.values[ops["q"][0]].shape
    if prod(g.values[source].shape) != 3 * b * h * s * d or tuple(g.values[ops["v"][0]].shape) != (b, h, s, d):
        return None
    got = {k: _moved_indices(g, source, c) for k, (_, c) in found.items()}
    for layout, perm in LAYOUTS.items():
        packed = (s, b, 3, h, d) if layout == "seq_first" else (b, s, 3, h, d)
        heads = np.arange(3 * b * h * s * d).reshape(packed).transpose(perm)
        want = {"q": heads[0], "kt": np.swapaxes(heads[1], -1, -2), "v": heads[2]}
        if all(got[k].shape == want[k].shape and np.array_equal(got[k], want[k]) for k in want):
            chains = list({n.name: n for _, c in found.values() for n in c}.values())
            return _Match(qk, pv, ops, source, layout, (b, h, s, d), scale, chains)
    return None


def _dead(g: Graph, ix: _Index, m: _Match) -> list[Node] | None:
    """The movement and scale nodes the rewrite replaces (all, or None if a result of one is read elsewhere)."""
    gone = m.chains + [n for _, n in m.ops.values() if n is not None]
    names = {n.name for n in gone}
    for n in gone:
        for o in n.outputs:
            readers = [r for r in ix.readers.get(o, []) if r.name not in names]
            if o in ix.outputs or any(r is not m.qk and not (r is m.pv and o == m.ops["v"][0]) for r in readers):
                return None
    return gone


def _rewrite(g: Graph, m: _Match) -> tuple[list[Node], Node | None]:
    """The nodes replacing `gone`: one Reshape + Transpose of the projection, Q, K, V as slices of it, K^T, and
    (placed where the first removed node was) and the scale after Q.K^T (None: none; placed after it)."""
    b, h, s, d = m.dims
    packed = (s, b, 3, h, d) if m.layout == "seq_first" else (b, s, 3, h, d)
    perm = LAYOUTS[m.layout]
    view = f"{m.source}@shape_{'_'.join(map(str, packed))}"  # kiln/isolate.py derives both from the projection
    heads = f"{view}@perm_{'_'.join(map(str, perm))}"
    q, kt, v = m.ops["q"][0], m.ops["kt"][0], m.ops["v"][0]
    k = f"{kt}@perm_0_1_3_2"
    base = m.qk.name
    g.values[view] = Value(view, packed)
    g.values[heads] = Value(heads, (3, b, h, s, d))
    g.values[k] = Value(k, (b, h, s, d))
    nodes = [Node(f"{base}/packed_heads.reshape", "Reshape", [m.source], [view], {"shape": packed}),
             Node(f"{base}/packed_heads", "Transpose", [view], [heads], {"perm": perm}, [n.name for n in m.chains])]
    nodes += [Node(f"{base}/packed_heads.{key}", "Gather", [heads], [out], {"axis": 0, "index": i})
              for i, (key, out) in enumerate((("q", q), ("k", k), ("v", v)))]
    nodes.append(Node(f"{base}/packed_heads.kt", "Transpose", [k], [kt], {"perm": (0, 1, 3, 2)}))
    scale = None
    if m.scale != 1.0:  # the scales on Q and K^T as one Mul after Q.K^T
        raw, c = f"{m.qk.outputs[0]}@unscaled", f"{base}/packed_heads.scale"
        g.values[raw] = Value(raw, g.values[m.qk.outputs[0]].shape)
        g.initializers[c] = np.asarray(m.scale, np.float32)
        g.values[c] = Value(c, ())
        scale = Node(f"{base}/scale", "Mul", [raw, c], list(m.qk.outputs), {},
                     [n.name for _, n in m.ops.values() if n is not None])
        m.qk.outputs = [raw]
    m.qk.inputs = [q, kt]
    return nodes, scale


def packed_attention(g: Graph, model: str, enable: bool, log: OptLog) -> tuple[list[dict], list[dict]]:
    """Every packed-projection attention of `g` rewritten (module docstring); (fused, audit) records."""
    fused: list[dict] = []
    audit: list[dict] = []
    for qk in [n for n in g.nodes if n.op_type == "MatMul" and not any(i in g.initializers for i in n.inputs)]:
        ix = _Index(g)
        m = _match(g, ix, qk)
        if m is None:
            continue
        subject, pattern = f"{model}:{qk.name}", "PackedQKV"
        gone = _dead(g, ix, m) if enable else None
        if gone is None:
            reason, detail = (("fusion_off", "ENABLE_FUSION=OFF") if not enable else
                              ("multiple_consumers", "a head split's intermediate is also read elsewhere"))
            log.add("fusion", subject, f"{pattern}:rejected", reason, detail=detail)
            audit.append({"node": qk.name, "into": m.source, "pattern": pattern, "reason": reason, "detail": detail})
            continue
        at = min(g.nodes.index(n) for n in gone)
        names = {n.name for n in gone}
        moves, scale = _rewrite(g, m)
        nodes = [n for n in g.nodes[:at] if n.name not in names] + moves
        for n in g.nodes[at:]:
            nodes += [] if n.name in names else [n] if n is not qk or scale is None else [n, scale]
        g.nodes = nodes
        b, h, s, d = m.dims
        detail = (f"{len(gone)} movement/scale nodes -> one Transpose of {m.source} ({m.layout}) to [3, {b}, {h}, "
                  f"{s}, {d}]; Q, K, V its slices; scale {m.scale:.6g} after Q.K^T")
        log.add("fusion", subject, f"Fused({pattern})", "packed_heads", into=qk.name, ops=len(gone), detail=detail)
        fused.append({"node": ",".join(n.name for n in gone), "into": qk.name, "pattern": pattern, "where": detail})
    return fused, audit


# ---------------------------------------------------------------- GEMM epilogues not taken (audited)

VIEWS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")


def _moves_unit_axes(g: Graph, t: Node) -> bool:
    """Whether Transpose `t` moves only unit axes (lowering makes it a view)."""
    _, perm = canonical_transpose(tuple(g.values[t.inputs[0]].shape), tuple(t.attrs["perm"]))
    return perm == tuple(range(len(perm)))


def _gemm_behind(g: Graph, ix: _Index, value: str) -> Node | None:
    """The constant-weight GEMM whose result `value` is, through views (Transposes of unit axes) and its bias Add
    (a MatMul's Add of a constant row, which lowering folds into the GEMM), or None."""
    n = ix.producer.get(value)
    while n is not None and (n.op_type in VIEWS or (n.op_type == "Transpose" and _moves_unit_axes(g, n))):
        n = ix.producer.get(n.inputs[0])
    if n is not None and n.op_type == "Add" and len([i for i in n.inputs if i in g.initializers]) == 1:
        n = ix.producer.get(next(i for i in n.inputs if i not in g.initializers))
        if n is not None and n.op_type != "MatMul":
            return None
    if n is None or n.op_type not in ("MatMul", "Gemm") or len(n.inputs) < 2 or n.inputs[1] not in g.initializers:
        return None
    return n


def audit_gemm_epilogues(g: Graph, model: str, enable: bool, log: OptLog) -> list[dict]:
    """A residual Add of a GEMM's result (a transformer's x + Linear(...)) and an Erf-form GELU of it (x * 0.5 *
    (1 + erf(x / sqrt 2))): the GEMM kernel (gemm_cube) applies a bias and a Fixpipe ReLU only, so both stay their
    own Vector kernels; each is an opportunity not taken, audited (after the fusion passes, on the fused graph)."""
    ix, audit = _Index(g), []
    for n in g.nodes:
        gemm, pattern, reason, detail = None, "", "", ""
        ins = [i for i in n.inputs if i]
        if (n.op_type == "Add" and len(ins) == 2 and not any(i in g.initializers for i in ins)
                and g.values[ins[0]].shape == g.values[ins[1]].shape):
            gemm = next((x for x in (_gemm_behind(g, ix, i) for i in ins) if x is not None), None)
            pattern, reason = f"{gemm.op_type if gemm else ''}+Add", "epilogue_unsupported"
            detail = f"residual add of {gemm.name if gemm else ''}: gemm_cube has no Vector-core residual pass yet"
        elif n.op_type == "Erf" and scalar_factor(g, ix.producer.get(n.inputs[0])) is not None:
            x, _ = scalar_factor(g, ix.producer[n.inputs[0]]) or ("", 1.0)
            gemm = _gemm_behind(g, ix, x)
            pattern, reason = f"{gemm.op_type if gemm else ''}+Gelu", "fixpipe_no_gelu"
            detail = f"GELU (Erf form) of {gemm.name if gemm else ''}: its own gelu_vector kernel"
        if gemm is None:
            continue
        if not enable:
            reason, detail = "fusion_off", "ENABLE_FUSION=OFF"
        log.add("fusion", f"{model}:{n.name}", f"{pattern}:rejected", reason, detail=detail)
        audit.append({"node": n.name, "into": gemm.name, "pattern": pattern, "reason": reason, "detail": detail})
    return audit
