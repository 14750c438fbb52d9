"""Lowering of the looped LSTM (a function of the lowerer, as copy_rules: lowering.py is at its size limit): the
frontend's LSTMLoop node (codegen/frontend/onnx_rnn.py) is one lstm_loop_mixed kernel reading the input projection, each
direction's R^T packed as ZN fractals, and the initial states given at run time or as constants."""
from __future__ import annotations

import numpy as np

from ..ir import layouts
from ..ir.graph import Node, OpInstance
from .lowered import LowererState, Step


def lstm_loop(lw: LowererState, node: Node) -> None:
    a = node.attrs
    r = np.asarray(lw.g.initializers[node.inputs[1]], np.float32)  # [D, 4H, H]: the frontend checked it constant
    packed = np.concatenate([layouts.kn_to_zn(r[d].T).reshape(-1) for d in range(r.shape[0])])
    ins = [lw.act(node, node.inputs[0], "ND"), lw.weight(f"{node.name}.r", packed)]
    for v in (i for i in node.inputs[2:4] if i):  # h0, c0 as [D, B, H]
        if v in lw.g.initializers:
            ins.append(lw.weight(f"{node.name}.{v}", np.asarray(lw.g.initializers[v]).astype(np.float16).reshape(-1)))
        else:
            ins.append(lw.act(node, v, "ND"))
    attrs = {k: a[k] for k in ("seq", "batch", "hidden", "dirs", "reverse")}
    attrs.update(h0=bool(node.inputs[2:3] and node.inputs[2]), c0=bool(node.inputs[3:4] and node.inputs[3]),
                 activation="", bias=False)
    out = lw.out(node, "ND")
    lw.steps.append(Step("kernel", node.name, list(node.source) or [node.name], ["LSTM"], ins, out,
                         instance=OpInstance(node.name, "LSTMLoop", attrs)))
    lw.decisions.append(f"{node.name}: the LSTM recurrence is one lstm_loop_mixed kernel ({a['seq']} steps, "
                        f"{a['dirs']} direction(s) as blocks)")
