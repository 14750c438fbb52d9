"""Lowering of the looped LSTM and GRU (functions of the lowerer, as copy_rules: lowering.py is at its size limit):
the frontend's LSTMLoop / GRULoop node (codegen/frontend/onnx_rnn.py) is one lstm_loop_mixed / gru_loop_mixed kernel
reading the input projection, each direction's R^T packed as ZN fractals, and the initial states given at run time
or as constants (the GRU with linear_before_reset also Rb_h, broadcast over the batch rows)."""
from __future__ import annotations

import numpy as np

from ..ir import layouts
from ..ir.graph import Node, OpInstance
from .lowered import LowererState, Step


def _states(lw: LowererState, node: Node, names: list[str], ins: list) -> None:
    """Append the initial states `names` ([D, B, H] each; "" absent) as constants or run-time inputs."""
    for v in (i for i in names if i):
        if v in lw.g.initializers:
            ins.append(lw.weight(f"{node.name}.{v}", np.asarray(lw.g.initializers[v]).astype(np.float16).reshape(-1)))
        else:
            ins.append(lw.act(node, v, "ND"))


def lstm_loop(lw: LowererState, node: Node) -> None:
    a = node.attrs
    r = np.asarray(lw.g.initializers[node.inputs[1]], np.float32)  # [D, 4H, H]: the frontend checked it constant
    packed = np.concatenate([layouts.kn_to_zn(r[d].T).reshape(-1) for d in range(r.shape[0])])
    ins = [lw.act(node, node.inputs[0], "ND"), lw.weight(f"{node.name}.r", packed)]
    _states(lw, node, node.inputs[2:4], ins)  # h0, c0
    attrs = {k: a[k] for k in ("seq", "batch", "hidden", "dirs", "reverse")}
    attrs.update(h0=bool(node.inputs[2:3] and node.inputs[2]), c0=bool(node.inputs[3:4] and node.inputs[3]),
                 activation="", bias=False)
    out = lw.out(node, "ND")
    lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], ["LSTM"], ins, out,
                         instance=OpInstance(node.name, "LSTMLoop", attrs)))
    lw.decisions.append(f"{node.name}: the LSTM recurrence is one lstm_loop_mixed kernel ({a['seq']} steps, "
                        f"{a['dirs']} direction(s) as blocks)")


def gru_loop(lw: LowererState, node: Node) -> None:
    """R^T per direction: with linear_before_reset one ZN block [H, 3H], else R_zr^T [H, 2H] then R_h^T [H, H] (the
    kernel's two Cube steps, each a block of its own); Rb_h [D, H] broadcast to [D, B, H]."""
    a = node.attrs
    r, hid = np.asarray(lw.g.initializers[node.inputs[1]], np.float32), a["hidden"]  # [D, 3H, H]
    blocks = [[r[d]] if a["lbr"] else [r[d][:2 * hid], r[d][2 * hid:]] for d in range(a["dirs"])]
    packed = np.concatenate([layouts.kn_to_zn(part.T).reshape(-1) for parts in blocks for part in parts])
    ins = [lw.act(node, node.inputs[0], "ND"), lw.weight(f"{node.name}.r", packed)]
    if a["lbr"]:
        rbh = np.asarray(lw.g.initializers[node.inputs[2]], np.float32).reshape(a["dirs"], 1, hid)
        ins.append(lw.weight(f"{node.name}.rbh", np.broadcast_to(rbh, (a["dirs"], a["batch"], hid))
                             .astype(np.float16).reshape(-1)))
    _states(lw, node, node.inputs[3:4], ins)  # h0
    attrs = {k: a[k] for k in ("seq", "batch", "hidden", "dirs", "reverse", "lbr")}
    attrs.update(h0=bool(node.inputs[3:4] and node.inputs[3]), activation="", bias=False)
    out = lw.out(node, "ND")
    lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], ["GRU"], ins, out,
                         instance=OpInstance(node.name, "GRULoop", attrs)))
    lw.decisions.append(f"{node.name}: the GRU recurrence is one gru_loop_mixed kernel ({a['seq']} steps, "
                        f"{a['dirs']} direction(s) as blocks, linear_before_reset={int(a['lbr'])})")
