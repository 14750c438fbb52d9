"""LSTM and GRU in the frontend (codegen/frontend/onnx_rnn.py): what is refused names the node and what is accepted;
the unrolled graph computes what the node computes (ONNX Runtime runs both; tests/kiln/op_cases/rnn.py checks the
baked kernels), drops the terms of a zero initial state and the nodes of an unused output; unrolled_reference
names its nodes as the build does (the isolated per-kernel check reads them). An LSTM the looped kernel takes is
its input GEMM and one LSTMLoop node, whose reference is the node itself; the others are unrolled, saying why."""
import numpy as np
import pytest
from single_node import refusal

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen.frontend import onnx_import  # noqa: E402

T, B, IN, H = 3, 2, 5, 4


def rnn_model(op="LSTM", direction="forward", extra: dict | None = None, runtime_w=False, h0=False,
              outputs=("y", "y_h", "y_c"), hidden=H, **attrs):
    """A node named the_node reading x, W, R, B (and `extra` inputs by position: index -> (name, array or None for
    a graph input of the state's shape))."""
    H = hidden
    rng = np.random.default_rng(0)
    dirs, gates = (2 if direction == "bidirectional" else 1), (4 if op == "LSTM" else 3)
    init = {"W": rng.standard_normal((dirs, gates * H, IN)), "R": rng.standard_normal((dirs, gates * H, H)),
            "B": rng.standard_normal((dirs, 2 * gates * H))}
    init = {k: v.astype(np.float32) for k, v in init.items()}
    ins = ["x", "W", "R", "B"]
    graph_in = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, B, IN])]
    for index, (name, value) in sorted((extra or {}).items()):
        ins += [""] * (index + 1 - len(ins))
        ins[index] = name
        if value is None:
            graph_in.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [dirs, B, H]))
        else:
            init[name] = value
    if runtime_w:
        graph_in.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, list(init.pop("W").shape)))
    outputs = outputs[:3 if op == "LSTM" else 2]
    node = helper.make_node(op, ins, list(outputs), name="the_node", hidden_size=H, direction=direction, **attrs)
    graph = helper.make_graph([node], "g", graph_in,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
                              [numpy_helper.from_array(v, k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def saved(tmp_path, model):
    path = tmp_path / "rnn.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("op, kw, reason", [
    ("LSTM", {"activations": ["Sigmoid", "Relu", "Tanh"]},
     "activations=['Sigmoid', 'Relu', 'Tanh'] are not supported (accepted: the defaults, ['Sigmoid', 'Tanh', 'Tanh'])"),
    ("GRU", {"activations": ["HardSigmoid", "Tanh"], "activation_alpha": [0.3]}, "are not supported"),
    ("LSTM", {"activation_alpha": [0.5]}, "activation_alpha is not supported"),
    ("LSTM", {"layout": 2}, "layout=2 is not supported (accepted: 0, 1)"),
    ("GRU", {"linear_before_reset": 2}, "linear_before_reset=2 is not supported (accepted: 0, 1)"),
    ("LSTM", {"runtime_w": True}, "W (input 1) is computed at run time; kiln needs it constant"),
    ("LSTM", {"extra": {4: ("lens", np.array([3, 2], np.int32))}},
     "sequence_lens=(3, 2) differs from the sequence length 3 (accepted: absent or 3 for every batch row)"),
])
def test_refusals_name_the_node(tmp_path, op, kw, reason):
    assert reason in refusal(saved(tmp_path, rnn_model(op, **kw)))


def test_runtime_sequence_lens_is_refused(tmp_path):
    model = rnn_model(extra={4: ("lens", None)})
    model.graph.input[-1].type.tensor_type.elem_type = TensorProto.INT32
    del model.graph.input[-1].type.tensor_type.shape.dim[:]
    model.graph.input[-1].type.tensor_type.shape.dim.add().dim_value = B
    assert "sequence_lens (input 4) is computed at run time" in refusal(saved(tmp_path, model))


def _unrolled(model):
    g = onnx_import.load_model(model, "rnn.onnx")
    return g, onnx_import.unrolled_reference(model, {v.name: v.shape for v in g.inputs})


def assert_computes_the_same(got_model, model) -> None:
    """ONNX Runtime gives got_model's outputs equal to model's (and of the same shapes) on random inputs."""
    rng = np.random.default_rng(1)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = ort.InferenceSession(got_model.SerializeToString()).run(None, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, atol=2e-6)


@pytest.mark.parametrize("op, kw", [
    ("LSTM", {"direction": "bidirectional", "extra": {5: ("h0", None), 6: ("c0", None)}}),
    ("LSTM", {"direction": "reverse", "clip": 0.7, "input_forget": 1}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1, "extra": {5: ("h0", None)}}),
    ("GRU", {"extra": {5: ("h0", np.full((1, B, H), 0.5, np.float32))}}),
])
def test_unrolled_graph_computes_the_node(op, kw):
    model = rnn_model(op, **kw)
    _, unrolled = _unrolled(model)
    assert not any(n.op_type in ("LSTM", "GRU") for n in unrolled.graph.node)
    assert_computes_the_same(unrolled, model)


def test_zero_state_and_unused_outputs_leave_nodes_out():
    """A zero initial state has no hidden projection at t=0; without Y and Y_c the last C is not computed."""
    full, _ = _unrolled(rnn_model())
    zero_h0 = rnn_model(extra={5: ("h0", np.zeros((1, B, H), np.float32))})
    assert len(_unrolled(zero_h0)[0].nodes) == len(full.nodes)
    gemms = [n for n in full.nodes if n.op_type == "Gemm"]
    assert len(gemms) == 4 + 4 * (T - 1)  # per gate: the input projection, and one per step after the first
    only_h, _ = _unrolled(rnn_model(outputs=("", "y_h", "")))
    assert "Concat" not in {n.op_type for n in only_h.nodes} and len(only_h.nodes) < len(full.nodes)


def test_reference_names_every_unrolled_value():
    g, unrolled = _unrolled(rnn_model("GRU", "bidirectional", extra={5: ("h0", None)}))
    produced = {o for n in unrolled.graph.node for o in n.output}
    assert {o for n in g.nodes for o in n.outputs} <= produced


@pytest.mark.parametrize("op, direction, extra, attrs", [
    ("LSTM", "bidirectional", {5: ("h0", None), 6: ("c0", None)}, {}),
    ("LSTM", "reverse", {5: ("h0", np.full((1, B, 16), 0.5, np.float32))}, {}),
    ("LSTM", "forward", {}, {}),
    ("GRU", "bidirectional", {5: ("h0", None)}, {"linear_before_reset": 1}),
    ("GRU", "reverse", {5: ("h0", np.full((1, B, 16), 0.5, np.float32))}, {}),
    ("GRU", "forward", {}, {"linear_before_reset": 1}),
])
def test_looped_form_and_its_reference_compute_the_node(op, direction, extra, attrs):
    """hidden 16: one input GEMM (every direction's gates side by side) and one LSTMLoop / GRULoop node; the
    reference (the isolated check's) computes every value the build names, the loop's packed output by the
    node itself."""
    model = rnn_model(op, direction=direction, extra=extra, hidden=16, **attrs)
    log: list[str] = []
    g = onnx_import.load_model(model, "rnn.onnx", log=log)
    loop = f"{op}Loop"
    assert [n.op_type for n in g.nodes if n.op_type in ("Gemm", loop)] == ["Gemm", loop]
    assert any(f"looped (one {loop} kernel)" in line for line in log)
    ref = onnx_import.unrolled_reference(model, {v.name: v.shape for v in g.inputs})
    assert {o for n in g.nodes for o in n.outputs} <= {o for n in ref.graph.node for o in n.output}
    assert_computes_the_same(ref, model)


@pytest.mark.parametrize("op, kw, why", [
    ("LSTM", {"clip": 0.5}, "clip: the looped kernel takes none of these yet"),
    ("LSTM", {"layout": 1}, "layout=1"),
    ("LSTM", {"input_forget": 1}, "input_forget=1"),
    ("LSTM", {"hidden": 20}, "a hidden size that is a multiple of 16"),
    ("GRU", {"clip": 1.5}, "clip: the looped kernel takes none of these yet"),
    ("GRU", {"hidden": 200}, "a hidden size that is a multiple of 16"),
])
def test_what_the_looped_kernel_does_not_take_is_unrolled_saying_why(op, kw, why):
    hidden = kw.pop("hidden", 16)
    model = rnn_model(op, hidden=hidden, **kw)
    if kw.get("layout"):  # layout 1: x is [B, T, IN]
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = B
        model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = T
    log: list[str] = []
    g = onnx_import.load_model(model, "rnn.onnx", log=log)
    assert not {"LSTMLoop", "GRULoop"} & {n.op_type for n in g.nodes}
    assert any("unrolled (no looped kernel: " in line and why in line for line in log), log


def test_the_chooser_decides_between_the_forms():
    """A node the looped kernel takes is built looped or unrolled as the chooser (the build's: the cost model's)
    says, given the loop's attributes."""
    model = rnn_model("GRU", direction="bidirectional", extra={5: ("h0", None)}, hidden=16, linear_before_reset=1)
    asked: list[tuple] = []
    log: list[str] = []
    g = onnx_import.load_model(model, "rnn.onnx", log=log, recurrence=lambda *a: asked.append(a) and False)
    assert asked == [("the_node", "GRULoop", {"seq": T, "batch": B, "hidden": 16, "dirs": 2, "reverse": False,
                                              "h0": True, "c0": False, "lbr": True})]
    assert "GRULoop" not in {n.op_type for n in g.nodes}
    assert any("the cost model predicts the unrolled form faster" in line for line in log), log


def test_kernel_list_gru_loop_entries(tmp_path):
    """Kernel-list type GRULoop: the looped kernel's spec from its fields; a bad linear_before_reset is refused
    naming the entry."""
    from codegen import KilnError
    from codegen.frontend.kernel_list import load_kernel_list
    from codegen.ir.opspec import opspec_of
    path = tmp_path / "k.toml"
    entry = ('[[op]]\nlabel = "g"\ntype = "GRULoop"\nseq = 6\nbatch = 20\nhidden = 32\ndirection = "reverse"\n'
             'h0 = true\n')
    path.write_text(entry + "linear_before_reset = 1\n")
    (op,) = load_kernel_list(path)
    assert opspec_of(op).name == "gru_loop_reverse_t6_b20_h32_h0_lbr1"
    path.write_text(entry + "linear_before_reset = 2\n")
    with pytest.raises(KilnError, match="'linear_before_reset' 0 or 1"):
        load_kernel_list(path)
