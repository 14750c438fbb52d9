"""A CRNN text recogniser (Shi et al. 2015's shape, seeded random weights) written as an ONNX file for
bench_corpus.py: a 32 x 128 grey text line through four 3x3 Conv + ReLU + MaxPool stages to height 1, the width as
a 32-step sequence, two bidirectional LSTM layers (hidden 128) and a linear head over 37 classes (CTC's blank, 10
digits, 26 letters); crnn_gru.onnx the same with GRU layers (linear_before_reset=1, as PyTorch exports nn.GRU).

    python benchmarks/crnn_onnx.py DIR        # writes DIR/crnn.onnx and DIR/crnn_gru.onnx
    python benchmarks/bench_corpus.py --models DIR --only crnn --markdown
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def crnn(hidden: int = 128, classes: int = 37, height: int = 32, width: int = 128, rnn: str = "LSTM"):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    init: dict[str, np.ndarray] = {}
    nodes = []
    x, cin = "image", 1
    for k, (cout, pool) in enumerate([(64, (2, 2)), (128, (2, 2)), (256, (2, 1)), (256, (4, 1))]):
        init[f"conv{k}.w"] = rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2 / (9 * cin))
        init[f"conv{k}.b"] = rng.standard_normal(cout) * 0.05
        nodes += [helper.make_node("Conv", [x, f"conv{k}.w", f"conv{k}.b"], [f"c{k}"], name=f"conv{k}",
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"], name=f"relu{k}"),
                  helper.make_node("MaxPool", [f"r{k}"], [f"p{k}"], name=f"pool{k}", kernel_shape=list(pool),
                                   strides=list(pool))]
        x, cin = f"p{k}", cout
    steps = width // 4
    init["squeeze_axes"] = np.array([2], np.int64)
    nodes += [helper.make_node("Squeeze", [x, "squeeze_axes"], ["feat"], name="squeeze_h"),
              helper.make_node("Transpose", ["feat"], ["seq0"], name="to_sequence", perm=[2, 0, 1])]
    init["merge_shape"] = np.array([steps, 1, 2 * hidden], np.int64)
    x, cin = "seq0", cin
    gates, attrs = (4, {}) if rnn == "LSTM" else (3, {"linear_before_reset": 1})
    for k in range(2):
        scale, r = 1 / np.sqrt(hidden), rnn.lower()
        init[f"{r}{k}.W"] = rng.uniform(-scale, scale, (2, gates * hidden, cin))
        init[f"{r}{k}.R"] = rng.uniform(-scale, scale, (2, gates * hidden, hidden))
        init[f"{r}{k}.B"] = rng.uniform(-scale, scale, (2, 2 * gates * hidden))
        nodes += [helper.make_node(rnn, [x, f"{r}{k}.W", f"{r}{k}.R", f"{r}{k}.B"], [f"y{k}"],
                                   name=f"b{r}{k}", hidden_size=hidden, direction="bidirectional", **attrs),
                  helper.make_node("Transpose", [f"y{k}"], [f"yt{k}"], name=f"directions_last{k}", perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"yt{k}", "merge_shape"], [f"seq{k + 1}"], name=f"merge{k}")]
        x, cin = f"seq{k + 1}", 2 * hidden
    init["head.w"] = rng.standard_normal((cin, classes)) / np.sqrt(cin)
    init["head.b"] = rng.standard_normal(classes) * 0.05
    nodes += [helper.make_node("MatMul", [x, "head.w"], ["logits0"], name="head"),
              helper.make_node("Add", ["logits0", "head.b"], ["logits"], name="head_bias")]
    graph = helper.make_graph(
        nodes, "crnn", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, height, width])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [steps, 1, classes])],
        [numpy_helper.from_array(v.astype(np.float32) if v.dtype.kind == "f" else v, k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


if __name__ == "__main__":
    import onnx
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    for name, rnn in (("crnn", "LSTM"), ("crnn_gru", "GRU")):
        model = crnn(rnn=rnn)
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, out / f"{name}.onnx")
        print(out / f"{name}.onnx")
