"""LSTM and GRU (the recurrence looped inside one lstm_loop_mixed / gru_loop_mixed kernel where it takes the node
and the cost model predicts it faster, otherwise unrolled over the baked sequence, codegen/frontend/onnx_rnn.py)
against ONNX Runtime: every direction with and without initial states (given at run time or constant), pairwise with
GRU's linear_before_reset, layout 1, clip, LSTM peepholes and input_forget, a constant full-length sequence_lens, a
hidden size that is not a multiple of 16; and the acceptance model, a small CRNN text recogniser (conv backbone ->
reshape to a width-major sequence -> bidirectional LSTM -> linear head). ONNX Runtime runs no layout-1 RNN, so
those cases' reference is the layout-0 node between Transposes (the spec's definition of layout 1)."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from . import OpCase

T, B, IN, H = 4, 2, 10, 16
TOL = 4e-3  # measured at most 1.2e-3 (fp16 storage of the states through the steps)


def _rnn_model(name: str, node, inputs: list, init: dict[str, np.ndarray], outs: list[str], nodes_before=(),
               nodes_after=()) -> object:
    graph = helper.make_graph([*nodes_before, node, *nodes_after], name, inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
                              [numpy_helper.from_array(v, k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def _rnn(name: str, op: str = "LSTM", direction: str = "forward", state: str = "", layout: int = 0,
         hidden: int = H, peepholes: bool = False, lens: bool = False, launches: int | None = None,
         **attrs) -> OpCase:
    """One LSTM / GRU node, every output used. state: "" (zero), "input" (graph inputs), "const" (initializers)."""
    rng = np.random.default_rng(len(name))
    dirs, gates = (2 if direction == "bidirectional" else 1), (4 if op == "LSTM" else 3)
    init = {"W": rng.standard_normal((dirs, gates * hidden, IN)) * 0.4, "R": rng.standard_normal(
        (dirs, gates * hidden, hidden)) * 0.3, "B": rng.standard_normal((dirs, 2 * gates * hidden)) * 0.3}
    x_shape, s_shape = ([B, T, IN], [B, dirs, hidden]) if layout else ([T, B, IN], [dirs, B, hidden])
    ins, graph_in = ["x", "W", "R", "B", "", ""], [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    if lens:
        ins[4], init["lens"] = "lens", np.full(B, T, np.int32)
    states = ["h0", "c0"] if op == "LSTM" else ["h0"]
    for k, s in enumerate(states if state else []):
        while len(ins) <= 5 + k:
            ins.append("")
        ins[5 + k] = s
        if state == "const":
            init[s] = rng.standard_normal(s_shape)
        else:
            graph_in.append(helper.make_tensor_value_info(s, TensorProto.FLOAT, s_shape))
    if peepholes:
        ins += [""] * (8 - len(ins))
        ins[7], init["P"] = "P", rng.standard_normal((dirs, 3 * hidden)) * 0.5
    while ins[-1] == "":
        ins.pop()
    init = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in init.items()}
    outs = ["y", "y_h", "y_c"][:3 if op == "LSTM" else 2]
    node = helper.make_node(op, ins, outs, name=name, hidden_size=hidden, direction=direction, layout=layout,
                            **attrs)
    model = _rnn_model(name, node, graph_in, init, outs)
    reference = None
    if layout:  # Transposes around the layout-0 node
        before = [helper.make_node("Transpose", [i], [f"{i}_t"], perm=[1, 0, 2]) for i in ["x", *states]
                  if i in ins]
        ref_ins = [f"{i}_t" if i in ("x", *states) else i for i in ins]
        after = [helper.make_node("Transpose", [f"{o}_t"], [o], perm=[2, 0, 1, 3] if o == "y" else [1, 0, 2])
                 for o in outs]
        ref_node = helper.make_node(op, ref_ins, [f"{o}_t" for o in outs], hidden_size=hidden, direction=direction,
                                    **attrs)
        reference = _rnn_model(name, ref_node, graph_in, init, outs, before, after)
    return OpCase(name, model, tol=TOL, launches=launches, reference=reference)


def _crnn() -> OpCase:
    """A CRNN text recogniser in small: Conv 3x3 + ReLU, MaxPool 2x2, Conv 3x3 + ReLU, MaxPool (2, 1) to height 1
    -> Squeeze H -> Transpose to [W, N, C] (the width is the sequence) -> bidirectional LSTM -> Transpose and
    Reshape to [W, N, 2 H] -> a linear head over the classes (MatMul + Add)."""
    rng = np.random.default_rng(20)
    c1, c2, hid, classes, width = 16, 32, 32, 11, 16
    init = {"w1": rng.standard_normal((c1, 1, 3, 3)) * 0.4, "b1": rng.standard_normal(c1) * 0.1,
            "w2": rng.standard_normal((c2, c1, 3, 3)) * 0.1, "b2": rng.standard_normal(c2) * 0.1,
            "W": rng.standard_normal((2, 4 * hid, c2)) * 0.2, "R": rng.standard_normal((2, 4 * hid, hid)) * 0.2,
            "B": rng.standard_normal((2, 8 * hid)) * 0.1, "wh": rng.standard_normal((2 * hid, classes)) * 0.3,
            "bh": rng.standard_normal(classes) * 0.1, "axes": np.array([2], np.int64),
            "shape": np.array([width // 2, 1, 2 * hid], np.int64)}
    init = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in init.items()}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 1], strides=[2, 1]),
             helper.make_node("Squeeze", ["p2", "axes"], ["feat"], name="squeeze_h"),
             helper.make_node("Transpose", ["feat"], ["seq"], name="to_seq", perm=[2, 0, 1]),
             helper.make_node("LSTM", ["seq", "W", "R", "B"], ["rnn_y"], name="blstm", hidden_size=hid,
                              direction="bidirectional"),
             helper.make_node("Transpose", ["rnn_y"], ["rnn_t"], name="dirs_last", perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["rnn_t", "shape"], ["feat2"], name="merge_dirs"),
             helper.make_node("MatMul", ["feat2", "wh"], ["logits0"], name="head"),
             helper.make_node("Add", ["logits0", "bh"], ["logits"], name="head_bias")]
    graph = helper.make_graph(nodes, "crnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, width])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return OpCase("crnn_conv_bilstm_head", model, tol=TOL)


CASES = [
    _rnn("lstm_forward", launches=2),  # the input GEMM (4 gates side by side), then the lstm_loop_mixed kernel
    _rnn("lstm_reverse_state_in", direction="reverse", state="input"),
    _rnn("lstm_bidirectional", direction="bidirectional"),
    _rnn("lstm_bidirectional_state_const", direction="bidirectional", state="const"),
    _rnn("lstm_layout1_bidirectional_state_in", direction="bidirectional", state="input", layout=1),
    _rnn("lstm_peepholes_clip_reverse", direction="reverse", state="input", peepholes=True, clip=0.8),
    _rnn("lstm_input_forget_lens_h20", state="input", hidden=20, lens=True, input_forget=1),
    _rnn("gru_forward", op="GRU", launches=2),  # the input GEMM (3 gates), then gru_loop_mixed (2 Cube steps a step)
    _rnn("gru_forward_lbr_state_in", op="GRU", state="input", linear_before_reset=1),
    _rnn("gru_reverse_state_in", op="GRU", direction="reverse", state="input"),
    _rnn("gru_bidirectional_lbr", op="GRU", direction="bidirectional", linear_before_reset=1),
    _rnn("gru_bidirectional_state_const", op="GRU", direction="bidirectional", state="const"),
    _rnn("gru_layout1_lbr_clip_state_in", op="GRU", state="input", layout=1, linear_before_reset=1, clip=1.5),
    _crnn(),
]
