"""ONNX frontend, LSTM and GRU: the check, and the expansion of an accepted node into ops kiln already lowers (run
as a graph pass after constant folding, onnx_passes.expand_recurrent).

The sequence length is baked, so the recurrence unrolls at build time. Per direction:
  - the input projection of the whole sequence, X[T*B, I] . W_g^T + bias_g, one Gemm per gate (the gates share
    their input, so fusion joins them into one Cube GEMM); Split along the rows gives each step's [B, H] as a view;
  - per step the hidden projection H[B, H] . R_g^T, one Gemm per gate (again one sibling Cube GEMM), then the
    gates as elementwise ops (Add, Sigmoid, Tanh, Mul, Sub) that the elementwise-program pass joins into Vector
    programs;
  - Y, Y_h, Y_c as Concats of the step states (Y's rows are written in place where the Concat is a view).
A zero initial state (absent, or a constant of zeros) drops the terms it would multiply. Refused, naming the node:
activations other than the defaults, a sequence_lens not equal to the full length everywhere, weights computed at
run time.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..ir.graph import Graph, Node, Value
from .onnx_base import as_ints, const_input, has_input, is_static, shape_of

DEFAULT_ACTIVATIONS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh")}
GATES = {"LSTM": 4, "GRU": 3}
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
LOOP_OPS = ("LSTMLoop", "GRULoop")  # the graph ops expand_loop writes (kiln's own, not ONNX): one looped kernel

_COMMON = ("direction: forward, reverse, bidirectional; activations: the defaults ({acts}); activation_alpha, "
           "activation_beta: absent; clip: any (gate pre-activations clamped); layout: 0, 1; sequence_lens: absent "
           "or constant, equal to the sequence length everywhere; W, R, B constant; initial_h{c}: constant, "
           "computed or absent (zero)")
ACCEPTED_RNN = {
    "LSTM": _COMMON.format(acts="Sigmoid, Tanh, Tanh", c=", initial_c") + "; P (peepholes): constant or absent; "
                                                                          "input_forget: 0, 1",
    "GRU": _COMMON.format(acts="Sigmoid, Tanh", c="") + "; linear_before_reset: 0, 1",
}


def check_recurrent(node: Node, g: Graph) -> str | None:
    """Why kiln cannot expand this LSTM / GRU node (None: it can)."""
    a, op = node.attrs, node.op_type
    direction = a.get("direction", "forward")
    if direction not in DIRECTIONS:
        return f"direction={direction!r} is not supported (accepted: forward, reverse, bidirectional)"
    acts = tuple(a.get("activations", ()))
    default = DEFAULT_ACTIVATIONS[op]
    if acts and acts != default * DIRECTIONS[direction]:
        return (f"activations={list(acts)} are not supported (accepted: the defaults, "
                f"{list(default * DIRECTIONS[direction])})")
    for key in ("activation_alpha", "activation_beta"):
        if a.get(key):
            return f"{key} is not supported (only the default activations, which take none)"
    if a.get("layout", 0) not in (0, 1):
        return f"layout={a['layout']} is not supported (accepted: 0, 1)"
    if op == "GRU" and a.get("linear_before_reset", 0) not in (0, 1):
        return f"linear_before_reset={a['linear_before_reset']} is not supported (accepted: 0, 1)"
    if op == "LSTM" and a.get("input_forget", 0) not in (0, 1):
        return f"input_forget={a['input_forget']} is not supported (accepted: 0, 1)"
    constants = ((1, "W"), (2, "R"), (3, "B")) + (((7, "P"),) if op == "LSTM" else ())
    for i, what in constants:
        if has_input(node, i) and const_input(g, node, i) is None:
            return f"{what} (input {i}) is computed at run time; kiln needs it constant"
    x = g.values.get(node.inputs[0])
    if x is None or not is_static(x.shape) or len(x.shape) != 3:
        return f"the input X needs a static 3-D shape, got {None if x is None else list(x.shape)}"
    seq = x.shape[1] if a.get("layout", 0) else x.shape[0]
    if has_input(node, 4):
        lens = const_input(g, node, 4)
        if lens is None:
            return "sequence_lens (input 4) is computed at run time; kiln bakes the sequence length"
        if np.any(lens.reshape(-1) != seq):
            return (f"sequence_lens={as_ints(lens)[:8]} differs from the sequence length {seq} (accepted: absent "
                    f"or {seq} for every batch row)")
    return None


def infer_recurrent(node: Node, g: Graph, attrs: dict) -> list[tuple[int, ...]]:
    """The spec's output shapes: Y [T, D, B, H] and Y_h, Y_c [D, B, H] ([B, T, D, H], [B, D, H] with layout 1)."""
    x, layout = shape_of(g, node.inputs[0]), attrs.get("layout", 0)
    seq, batch = (x[1], x[0]) if layout else (x[0], x[1])
    dirs = DIRECTIONS.get(attrs.get("direction", "forward"), 1)
    hidden = int(attrs.get("hidden_size") or shape_of(g, node.inputs[2])[-1])
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    return [(batch, seq, dirs, hidden) if layout else (seq, dirs, batch, hidden), state, state][:len(node.outputs)]


@dataclass
class _Rnn:
    """One accepted node being expanded: the graph, the node, its shapes and the nodes written so far."""
    g: Graph
    node: Node
    seq: int
    batch: int
    hidden: int
    nodes: list[Node] = field(default_factory=list)

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.g.values or name in self.g.initializers:
            name, k = f"{base}_{k}", k + 1
        return name

    def const(self, base: str, arr: np.ndarray) -> str:
        name = self.fresh(f"{self.node.name}.{base}")
        self.g.initializers[name] = arr
        self.g.values[name] = Value(name, tuple(int(d) for d in arr.shape), arr.dtype.name)
        return name

    def op(self, op_type: str, inputs: list[str], shape: tuple[int, ...], base: str, out: str = "",
           **attrs) -> str:
        """Append one node writing `out` (a fresh value named after `base` when empty) of `shape`."""
        out = out or self.fresh(f"{self.node.name}/{base}")
        self.g.values[out] = Value(out, tuple(shape), "float32")
        self.nodes.append(Node(f"{self.node.name}/{base}", op_type, inputs, [out], attrs))
        return out

    def split(self, x: str, parts: int, shape: tuple[int, ...], base: str) -> list[str]:
        """Split `x` along axis 0 into `parts` values of `shape` (views of it)."""
        outs = [self.fresh(f"{self.node.name}/{base}.{k}") for k in range(parts)]
        for o in outs:
            self.g.values[o] = Value(o, shape, "float32")
        self.nodes.append(Node(f"{self.node.name}/{base}", "Split", [x, self.ints([shape[0]] * parts)], outs,
                               {"axis": 0}))
        return outs

    def ints(self, values: list[int]) -> str:
        return self.const("i", np.array(values, np.int64))

    def gemm(self, x: str, w: np.ndarray, bias: np.ndarray | None, rows: int, base: str) -> str:
        """x . w^T (+ bias): a Gemm, or a constant when x is one (a constant initial state)."""
        if x in self.g.initializers:
            const = self.g.initializers[x].astype(np.float64) @ w.T.astype(np.float64)
            return self.const(base, (const + (0 if bias is None else bias)).astype(np.float32))
        ins = [x, self.const(f"{base}.w", np.ascontiguousarray(w, np.float32))]
        if bias is not None and np.any(bias):
            ins.append(self.const(f"{base}.b", bias.astype(np.float32)))
        return self.op("Gemm", ins, (rows, self.hidden), base, transB=1)

    def add(self, x: str | None, y: str | None, base: str) -> str | None:
        if x is None or y is None:
            return x or y
        return self.op("Add", [x, y], (self.batch, self.hidden), base)

    def unary(self, op_type: str, x: str, base: str) -> str:
        return self.op(op_type, [x], (self.batch, self.hidden), base)

    def mul(self, x: str, y: str, base: str) -> str:
        return self.op("Mul", [x, y], (self.batch, self.hidden), base)

    def gate(self, op_type: str, pre: str | None, base: str) -> str:
        """activation(clip(pre)); a zero pre-activation never happens (the input projection is always there)."""
        assert pre is not None
        clip = self.node.attrs.get("clip")
        if clip is not None:
            lo, hi = (self.const("clip", np.array(v, np.float32)) for v in (-float(clip), float(clip)))
            pre = self.op("Clip", [pre, lo, hi], (self.batch, self.hidden), f"{base}.clip")
        return self.unary(op_type, pre, base)


def _states(r: _Rnn, index: int, dirs: int) -> list[str | None]:
    """Each direction's initial state (input `index`: initial_h 5, initial_c 6) as a [B, H] value; None when
    zero (absent, or a constant of zeros)."""
    node, g = r.node, r.g
    const = const_input(g, node, index)
    if not has_input(node, index) or (const is not None and not np.any(const)):
        return [None] * dirs
    layout = node.attrs.get("layout", 0)
    if const is not None:
        return [r.const(f"init{index}.d{d}", np.ascontiguousarray(const[:, d] if layout else const[d], np.float32))
                for d in range(dirs)]
    src = node.inputs[index]
    if layout:  # [B, D, H] -> [D, B, H]
        src = r.op("Transpose", [src], (dirs, r.batch, r.hidden), f"init{index}.t", perm=[1, 0, 2])
    parts = r.split(src, dirs, (1, r.batch, r.hidden), f"init{index}.split") if dirs > 1 else [src]
    return [r.op("Reshape", [p, r.ints([r.batch, r.hidden])], (r.batch, r.hidden), f"init{index}.d{d}")
            for d, p in enumerate(parts)]


def _steps_of(r: _Rnn, x2d: str, w: np.ndarray, bias: np.ndarray, gates: int, d: int) -> list[list[str]]:
    """The input projection of direction d, one Gemm per gate over the whole sequence, split into the steps:
    result[t][k] is gate k's X_t . W_k^T + bias_k as a [B, H] value."""
    h, t_len, b = r.hidden, r.seq, r.batch
    per_gate = []
    for k in range(gates):
        proj = r.gemm(x2d, w[k * h:(k + 1) * h], bias[k * h:(k + 1) * h], t_len * b, f"d{d}.x{k}")
        if t_len == 1:
            per_gate.append([proj])
            continue
        per_gate.append(r.split(proj, t_len, (b, h), f"d{d}.x{k}.t"))
    return [[per_gate[k][t] for k in range(gates)] for t in range(t_len)]


def _lstm_step(r: _Rnn, xs: list[str], h: str | None, c: str | None, rw: np.ndarray, p: np.ndarray,
               tag: str) -> tuple[str, str]:
    """One LSTM step (gates i, o, f, c in ONNX order); returns (H_t, C_t)."""
    hid = r.hidden
    pre = [r.add(x, None if h is None else r.gemm(h, rw[k * hid:(k + 1) * hid], None, r.batch, f"{tag}.r{k}"),
                 f"{tag}.a{k}") for k, x in enumerate(xs)]
    if c is not None and np.any(p[0]):
        pre[0] = r.add(pre[0], r.mul(c, r.const("p_i", p[0].reshape(1, -1)), f"{tag}.pc_i"), f"{tag}.ap_i")
    i = r.gate("Sigmoid", pre[0], f"{tag}.i")
    if r.node.attrs.get("input_forget", 0):
        f = r.op("Sub", [r.const("one", np.array(1.0, np.float32)), i], (r.batch, hid), f"{tag}.f")
    else:
        if c is not None and np.any(p[2]):
            pre[2] = r.add(pre[2], r.mul(c, r.const("p_f", p[2].reshape(1, -1)), f"{tag}.pc_f"), f"{tag}.ap_f")
        f = r.gate("Sigmoid", pre[2], f"{tag}.f")
    cand = r.gate("Tanh", pre[3], f"{tag}.g")
    new_c = r.mul(i, cand, f"{tag}.ig")
    if c is not None:
        new_c = r.op("Add", [r.mul(f, c, f"{tag}.fc"), new_c], (r.batch, hid), f"{tag}.c")
    if np.any(p[1]):
        pre[1] = r.add(pre[1], r.mul(new_c, r.const("p_o", p[1].reshape(1, -1)), f"{tag}.pc_o"), f"{tag}.ap_o")
    o = r.gate("Sigmoid", pre[1], f"{tag}.o")
    return r.mul(o, r.unary("Tanh", new_c, f"{tag}.tc"), f"{tag}.h"), new_c


def _gru_step(r: _Rnn, xs: list[str], h: str | None, rw: np.ndarray, rb_h: np.ndarray, tag: str) -> str:
    """One GRU step (gates z, r, h in ONNX order); returns H_t."""
    hid, lbr = r.hidden, r.node.attrs.get("linear_before_reset", 0)

    def hr(x: str, k: int, bias: np.ndarray | None) -> str:
        return r.gemm(x, rw[k * hid:(k + 1) * hid], bias, r.batch, f"{tag}.r{k}")

    z = r.gate("Sigmoid", r.add(xs[0], None if h is None else hr(h, 0, None), f"{tag}.az"), f"{tag}.z")
    inner: str | None = None  # the reset gate's term; none with a zero state (and no Rb_h after the reset)
    if h is not None or (lbr and np.any(rb_h)):
        rg = r.gate("Sigmoid", r.add(xs[1], None if h is None else hr(h, 1, None), f"{tag}.ar"), f"{tag}.r")
        if h is None:
            inner = r.mul(rg, r.const("rb_h", rb_h.reshape(1, -1)), f"{tag}.rrb")
        elif lbr:
            inner = r.mul(rg, hr(h, 2, rb_h), f"{tag}.rhr")
        else:
            inner = hr(r.mul(rg, h, f"{tag}.rh"), 2, None)
    cand = r.gate("Tanh", r.add(xs[2], inner, f"{tag}.ah"), f"{tag}.hh")
    one_minus_z = r.op("Sub", [r.const("one", np.array(1.0, np.float32)), z], (r.batch, hid), f"{tag}.1mz")
    new_h = r.mul(one_minus_z, cand, f"{tag}.zhh")
    if h is not None:
        new_h = r.op("Add", [new_h, r.mul(z, h, f"{tag}.zh")], (r.batch, hid), f"{tag}.h")
    return new_h


def _direction(r: _Rnn, x2d: str, d: int, init: tuple[str | None, str | None]) -> tuple[list[str], str, str | None]:
    """Direction d unrolled: its H_t in time order, its last H and (LSTM) last C."""
    node, g, op, hid = r.node, r.g, r.node.op_type, r.hidden
    gates = GATES[op]
    w, rw = g.initializers[node.inputs[1]][d], g.initializers[node.inputs[2]][d]
    b = const_input(g, node, 3)
    b = np.zeros(2 * gates * hid, np.float32) if b is None else b[d]
    wb, rb = b[:gates * hid], b[gates * hid:]
    lbr = op == "GRU" and node.attrs.get("linear_before_reset", 0)
    in_bias = wb + rb
    if lbr:  # Rb_h stays inside r * (H R_h^T + Rb_h)
        in_bias = np.concatenate([wb[:2 * hid] + rb[:2 * hid], wb[2 * hid:]])
    steps = _steps_of(r, x2d, w, in_bias, gates, d)
    reverse = node.attrs.get("direction", "forward") == "reverse" or d == 1
    h, c = init
    p = const_input(g, node, 7) if op == "LSTM" else None
    p = np.zeros((3, hid), np.float32) if p is None else p[d].reshape(3, hid)
    out: list[str] = [""] * r.seq
    for t in (range(r.seq - 1, -1, -1) if reverse else range(r.seq)):
        if op == "LSTM":
            h, c = _lstm_step(r, steps[t], h, c, rw, p, f"d{d}.t{t}")
        else:
            h = _gru_step(r, steps[t], h, rw, rb[2 * hid:], f"d{d}.t{t}")
        out[t] = h
    assert h is not None
    return out, h, c


def _stack(r: _Rnn, parts: list[str], shape: tuple[int, ...], out: str, base: str, perm: list[int] | None) -> None:
    """Write `out` as the [B, H] `parts` stacked into `shape` (then permuted to layout 1 by `perm`)."""
    rows = r.batch * len(parts)
    flat = parts[0] if len(parts) == 1 else r.op("Concat", parts, (rows, r.hidden), f"{base}.rows", axis=0)
    if perm is None:
        r.op("Reshape", [flat, r.ints(list(shape))], shape, base, out=out)
        return
    shaped = r.op("Reshape", [flat, r.ints(list(shape))], shape, f"{base}.seq")
    r.op("Transpose", [shaped], tuple(shape[i] for i in perm), base, out=out, perm=perm)


def expand_rnn(g: Graph, node: Node) -> list[Node]:
    """The nodes an accepted LSTM / GRU node becomes (values and constants are added to `g`)."""
    layout = node.attrs.get("layout", 0)
    xs = g.values[node.inputs[0]].shape
    seq, batch = (xs[1], xs[0]) if layout else (xs[0], xs[1])
    hidden = int(g.initializers[node.inputs[2]].shape[-1])
    r = _Rnn(g, node, seq, batch, hidden)
    dirs = DIRECTIONS[node.attrs.get("direction", "forward")]
    x = node.inputs[0]
    if layout:
        x = r.op("Transpose", [x], (seq, batch, xs[2]), "x.seq", perm=[1, 0, 2])
    # one row view of X per direction: each direction's gate GEMMs are a sibling group of their own (4 or 3
    # GEMMs, within MAX_FUSION_DEPTH at O1/O2, where both directions' 8 would not be)
    x2d = [r.op("Reshape", [x, r.ints([seq * batch, xs[2]])], (seq * batch, xs[2]), f"x.rows.d{d}")
           for d in range(dirs)]
    inits = zip(_states(r, 5, dirs), _states(r, 6, dirs) if node.op_type == "LSTM" else [None] * dirs)
    results = [_direction(r, x2d[d], d, init) for d, init in enumerate(inits)]
    outs = list(node.outputs) + [""] * 3
    used = {i for n in g.nodes for i in n.inputs if n is not node} | {v.name for v in g.outputs}
    if outs[0] and outs[0] in used:
        _stack(r, [hs[t] for t in range(seq) for hs, _, _ in results], (seq, dirs, batch, hidden), outs[0], "y",
               [2, 0, 1, 3] if layout else None)
    for k, base in ((1, "y_h"), (2, "y_c")):
        if outs[k] and outs[k] in used:
            _stack(r, [res[k] for res in results], (dirs, batch, hidden), outs[k], base,  # type: ignore[misc]
                   [1, 0, 2] if layout else None)
    return r.nodes


LOOP_MAX_HIDDEN = 192       # R^T of one direction (8 H^2 bytes for an LSTM) stays in L1 (512 KiB on the 910B)
LOOP_MAX_STATE = 2048       # batch * hidden: the step's tiles stay in UB and L0C
LOOP_OP = {"LSTM": "LSTMLoop", "GRU": "GRULoop"}  # the looped kernel's graph op per ONNX op


def loop_problem(node: Node, g: Graph) -> str | None:
    """Why the looped kernel (lstm_loop_mixed, gru_loop_mixed) does not take this accepted node, which is then
    unrolled (None: it does)."""
    a = node.attrs
    p = const_input(g, node, 7) if node.op_type == "LSTM" else None
    why = [what for what, bad in (
        ("layout=1", a.get("layout", 0) != 0), ("clip", a.get("clip") is not None),
        ("input_forget=1", bool(a.get("input_forget", 0))), ("peepholes", p is not None and bool(np.any(p))))
        if bad]
    if why:
        return f"{', '.join(why)}: the looped kernel takes none of these yet"
    x = g.values[node.inputs[0]].shape
    hidden = int(g.initializers[node.inputs[2]].shape[-1])
    if hidden % 16 or hidden > LOOP_MAX_HIDDEN or x[1] * hidden > LOOP_MAX_STATE:
        return (f"hidden {hidden}, batch {x[1]}: the looped kernel takes a hidden size that is a multiple of 16 up "
                f"to {LOOP_MAX_HIDDEN}, batch * hidden up to {LOOP_MAX_STATE}")
    return None


def _zero_or(g: Graph, node: Node, index: int) -> str:
    """Input `index` of the node, or "" when absent or a constant of zeros."""
    const = const_input(g, node, index)
    return "" if not has_input(node, index) or (const is not None and not np.any(const)) else node.inputs[index]


def _loop_biases(r: _Rnn, dirs: int, gates: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The input GEMM's bias (every direction's gates side by side: Wb + Rb, but for a GRU with
    linear_before_reset only Wb_h for gate h) and, for that GRU, Rb_h [D, H] (the kernel keeps it inside r * (.))."""
    b, hid = const_input(r.g, r.node, 3), r.hidden
    b = np.zeros((dirs, 2 * gates * hid), np.float32) if b is None else b
    lbr = r.node.op_type == "GRU" and bool(r.node.attrs.get("linear_before_reset", 0))
    in_bias = [b[d, :gates * hid] + b[d, gates * hid:] for d in range(dirs)]
    if lbr:
        in_bias = [np.concatenate([ib[:2 * hid], b[d, 2 * hid:3 * hid]]) for d, ib in enumerate(in_bias)]
    return np.concatenate(in_bias).astype(np.float32), (b[:, 5 * hid:].astype(np.float32) if lbr else None)


def expand_loop(g: Graph, node: Node) -> list[Node]:
    """An LSTM / GRU node the looped kernel takes: its input projection of every direction as one GEMM, the
    LSTMLoop / GRULoop node (one lstm_loop_mixed / gru_loop_mixed kernel) writing Y, Y_h (and Y_c) as one packed
    tensor, views of it as the outputs."""
    xs, dirs = g.values[node.inputs[0]].shape, DIRECTIONS[node.attrs.get("direction", "forward")]
    seq, batch, gates, lstm = xs[0], xs[1], GATES[node.op_type], node.op_type == "LSTM"
    w = g.initializers[node.inputs[1]]
    hidden = int(g.initializers[node.inputs[2]].shape[-1])
    r = _Rnn(g, node, seq, batch, hidden)
    bias, rb_h = _loop_biases(r, dirs, gates)
    x2d = r.op("Reshape", [node.inputs[0], r.ints([seq * batch, xs[2]])], (seq * batch, xs[2]), "x.rows")
    ins = [x2d, r.const("w", np.ascontiguousarray(w.reshape(dirs * gates * hidden, xs[2]), np.float32))]
    if np.any(bias):
        ins.append(r.const("b", bias))
    xw = r.op("Gemm", ins, (seq * batch, dirs * gates * hidden), "xw", transB=1)
    rows = dirs * batch
    if lstm:
        states = [_zero_or(g, node, 5), _zero_or(g, node, 6)]
    else:
        states = ["" if rb_h is None else r.const("rb_h", rb_h), _zero_or(g, node, 5)]
    packed = r.op(LOOP_OP[node.op_type], [xw, node.inputs[2], *states],
                  ((seq + 1 + lstm) * rows, hidden), "loop", seq=seq, batch=batch, hidden=hidden, dirs=dirs,
                  reverse=node.attrs.get("direction", "forward") == "reverse", onnx_inputs=list(node.inputs),
                  lbr=rb_h is not None)
    sizes = [seq * rows, rows, rows][:2 + lstm]
    parts = [r.fresh(f"{node.name}/loop.{k}") for k in ("y", "y_h", "y_c")[:2 + lstm]]
    for p, n in zip(parts, sizes):
        g.values[p] = Value(p, (n, hidden), "float32")
    r.nodes.append(Node(f"{node.name}/loop.split", "Split", [packed, r.ints(sizes)], parts, {"axis": 0}))
    shapes = [(seq, dirs, batch, hidden), (dirs, batch, hidden), (dirs, batch, hidden)]
    for out, part, shape, base in zip(node.outputs, parts, shapes, ("y", "y_h", "y_c")):
        if out:
            r.op("Reshape", [part, r.ints(list(shape))], shape, base, out=out)
    return r.nodes


def reference_nodes(g: Graph, loop: Node) -> list[Node]:
    """ONNX nodes computing what an LSTMLoop / GRULoop node writes (the isolated check's reference): the original
    node on its original inputs, its outputs as rows, concatenated."""
    a, lstm = loop.attrs, loop.op_type == "LSTMLoop"
    rows, hidden = a["dirs"] * a["batch"], a["hidden"]
    outs = [f"{loop.name}/ref.{k}" for k in ("y", "y_h", "y_c")[:2 + lstm]]
    direction = "bidirectional" if a["dirs"] == 2 else ("reverse" if a["reverse"] else "forward")
    attrs = {"hidden_size": hidden, "direction": direction} | ({} if lstm else {"linear_before_reset": int(a["lbr"])})
    nodes = [Node(f"{loop.name}/ref", "LSTM" if lstm else "GRU", a["onnx_inputs"], outs, attrs)]
    flat = []
    for o, n in zip(outs, (a["seq"] * rows, rows, rows)):
        shape = f"{o}.shape"
        g.initializers[shape] = np.array([n, hidden], np.int64)
        flat.append(f"{o}.rows")
        nodes.append(Node(f"{o}.rows", "Reshape", [o, shape], [flat[-1]], {}))
    return nodes + [Node(f"{loop.name}/ref.concat", "Concat", flat, list(loop.outputs), {"axis": 0})]


def _live(nodes: list[Node], used: set[str]) -> list[Node]:
    """`nodes` without those whose outputs nothing in `used` or a later live node reads (a state no output
    needs, e.g. the last C when Y_c is not used)."""
    live: list[Node] = []
    for n in reversed(nodes):
        if any(o in used for o in n.outputs):
            live.append(n)
            used |= {i for i in n.inputs if i}
    return live[::-1]


def loop_attrs(node: Node, g: Graph) -> dict:
    """The looped kernel's attributes for an LSTM / GRU node it takes (its op spec's fields, recurrent_spec.py)."""
    xs, a = g.values[node.inputs[0]].shape, node.attrs
    return {"seq": xs[0], "batch": xs[1], "hidden": int(g.initializers[node.inputs[2]].shape[-1]),
            "dirs": DIRECTIONS[a.get("direction", "forward")], "reverse": a.get("direction", "forward") == "reverse",
            "h0": bool(_zero_or(g, node, 5)), "c0": node.op_type == "LSTM" and bool(_zero_or(g, node, 6)),
            "lbr": node.op_type == "GRU" and bool(a.get("linear_before_reset", 0))}


# (node name, loop op, loop_attrs) -> build the looped form? The cost model's choice (codegen/select/recurrent.py
# chooser); None: looped wherever the kernel takes the node
Chooser = Callable[[str, str, dict], bool]


def expand_recurrent_nodes(g: Graph, log: list[str], choose: Chooser | None = None) -> dict[str, list[Node]]:
    """Replace every accepted LSTM / GRU node of `g` (edited in place) by its expansion, looped where the kernel
    takes it and `choose` says so, else unrolled; the rest stay, for the op check to refuse by name. Returns the
    nodes each expanded node became, by its name. The new nodes are named `<node>/...` and are their own source
    (the isolated check finds each in ONNX Runtime's unrolled graph)."""
    expanded: dict[str, list[Node]] = {}
    for node in [n for n in g.nodes if n.op_type in GATES and check_recurrent(n, g) is None]:
        at = g.nodes.index(node)
        g.nodes.remove(node)
        used = {i for n in g.nodes for i in n.inputs if i} | {v.name for v in g.outputs}
        why_not = loop_problem(node, g)
        if not why_not and choose and not choose(node.name, LOOP_OP[node.op_type], loop_attrs(node, g)):
            why_not = "the cost model predicts the unrolled form faster"
        new = _live(expand_rnn(g, node) if why_not else expand_loop(g, node), used)
        g.nodes[at:at] = new
        expanded[node.name] = new
        kinds = sorted({n.op_type for n in new})
        how = (f"unrolled (no looped kernel: {why_not})" if why_not else
               f"looped (one {LOOP_OP[node.op_type]} kernel)")
        log.append(f"expand_recurrent: '{node.name}' ({node.op_type}, {node.attrs.get('direction', 'forward')}) "
                   f"{how} into {len(new)} node(s) ({', '.join(kinds)})")
    return expanded
