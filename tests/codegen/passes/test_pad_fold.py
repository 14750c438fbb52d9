"""Pad (codegen/frontend/onnx_pad.py, codegen/passes/pad_fold.py): a zero constant pad of H and W folds into the
Conv reading it, logged; another constant pad (pads >= 0) is one copy_mte kernel, reflect and edge one gather_mte
kernel per padded axis; crops and reflections beyond size - 1 on run-time data are refused naming the node;
Pad of constant data (any mode) folds at build time as np.pad. The values: tests/kiln/op_cases/pad.py."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen import KilnError  # noqa: E402
from codegen.frontend.onnx_import import check_onnx, load_onnx  # noqa: E402
from codegen.ir.optlog import OptLog  # noqa: E402
from codegen.options import parse_options  # noqa: E402
from codegen.pipeline import plan_model  # noqa: E402

X = [1, 4, 6, 7]


def _model(tmp_path, pads, mode="constant", value=None, after=("Conv",), opset=17, data_const=False):
    inits = {"pads": np.asarray(pads, np.int64), "w": np.ones((8, 4, 3, 3), np.float32)}
    if value is not None:
        inits["v"] = np.float32(value)
    if data_const:
        inits["c"] = np.arange(np.prod(X), dtype=np.float32).reshape(X)
    pad_in = ["c" if data_const else "x", "pads"] + (["v"] if value is not None else [])
    nodes = [helper.make_node("Pad", pad_in, ["p"], name="the_node", mode=mode)]
    out = "y"
    if data_const:
        nodes.append(helper.make_node("Add", ["p", "x"], ["y"], name="add"))
    for i, op in enumerate(after):
        src, dst = ("p" if i == 0 else f"a{i}"), ("y" if i == len(after) - 1 else f"a{i + 1}")
        nodes.append(helper.make_node(op, [src, "w"] if op == "Conv" else [src], [dst], name=f"after{i}"))
    shape = [X[d] + pads[d] + pads[4 + d] for d in range(4)] if data_const else X
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _plan(path):
    log = OptLog()
    stages = plan_model(load_onnx(path), "m", parse_options({"KILN_MODELS": ""}), log, memory=False)
    return stages, log


def test_a_zero_pad_of_h_and_w_is_the_convs_padding(tmp_path):
    stages, log = _plan(_model(tmp_path, [0, 0, 1, 2, 0, 0, 3, 0], value=0.0))
    (spec,) = stages.specs.values()
    assert (spec.pt, spec.pl, spec.pb, spec.pr) == (1, 2, 3, 0) and (spec.h, spec.w) == (6, 7)
    assert "[OPT] fusion m:the_node Fused(Pad+Conv) reason=pad_into_conv into=after0 pads=1x2x3x0" in log.lines
    _, log = _plan(_model(tmp_path, [0, 0, 1, 1, 0, 0, 1, 1]))
    assert any("Fused(Pad+Conv) reason=pad_into_conv" in line for line in log.lines)


@pytest.mark.parametrize("pads, mode, value, after, why", [
    ([0, 0, -1, 1, 0, 0, 1, 1], "constant", None, ("Conv",), "Pad runs with pads >= 0"),
    ([0, 0, -1, 0, 0, 0, 0, 0], "edge", None, ("Relu",), "here pads [0, 0, -1, 0, 0, 0, 0, 0]"),
    ([0, 0, 6, 0, 0, 0, 0, 0], "reflect", None, ("Relu",), "reflect pads 6, 0 of axis 2 (size 6): reflect takes "
                                                             "at most size - 1 a side"),
])
def test_other_pads_on_run_time_data_are_refused_naming_the_node(tmp_path, pads, mode, value, after, why):
    path = _model(tmp_path, pads, mode, value, after)
    with pytest.raises(KilnError, match=r"node 'the_node' \(Pad\)") as e:
        _plan(path)
    assert why in str(e.value)


@pytest.mark.parametrize("mode, pads, kernels", [
    ("reflect", [0, 0, 1, 1, 0, 0, 1, 1], 2), ("edge", [0, 0, 0, 2, 0, 0, 0, 0], 1),
    ("edge", [1, 0, 0, 0, 0, 0, 0, 0], 1),
])
def test_reflect_and_edge_are_a_gather_per_padded_axis(tmp_path, mode, pads, kernels):
    stages, _ = _plan(_model(tmp_path, pads, mode, None, ("Conv",)))
    steps = [s for s in stages.lowered.steps if s.kind == "kernel" and s.name == "the_node"]
    assert [s.kernel_op.type for s in steps] == ["Gather"] * kernels
    assert steps[-1].output == "p" and all(s.output.startswith("p@crop_") for s in steps[:-1])


@pytest.mark.parametrize("pads, value, after", [
    ([0, 0, 1, 1, 0, 0, 1, 1], 1.5, ("Conv",)),  # a non-zero value: not the Conv's padding
    ([0, 2, 1, 1, 0, 0, 1, 1], None, ("Relu",)),  # channels padded
    ([0, 0, 1, 1, 0, 0, 1, 1], None, ("Relu",)),  # not read by a Conv
])
def test_a_constant_pad_not_folded_is_one_copy_kernel(tmp_path, pads, value, after):
    stages, _ = _plan(_model(tmp_path, pads, "constant", value, after))
    (step,) = [s for s in stages.lowered.steps if s.kind == "kernel" and s.name == "the_node"]
    assert step.kernel_op.type == "Copy"
    assert sum(d > 0 for d in pads) + 1 == len(step.inputs)  # the input and one constant block per padded side
    assert any("the_node: Pad constant" in d for d in stages.lowered.decisions)


def test_pad_inputs_kiln_cannot_take_are_refused_by_the_frontend(tmp_path):
    (problem,) = check_onnx(_model(tmp_path, [0, 0, 1, 1, 0, 0, 1, 1], mode="wrap", opset=19))
    assert problem["node"] == "the_node" and "mode='wrap' is not supported (accepted: constant, reflect, edge)" \
        in problem["reason"]


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_of_constant_data_folds_at_build_time_as_np_pad(tmp_path, mode):
    pads = [0, 0, 1, 2, 0, 0, 2, 1]
    g = load_onnx(_model(tmp_path, pads, mode, 0.5 if mode == "constant" else None, after=(), data_const=True))
    (node,) = g.nodes
    const = next(v for k, v in g.initializers.items() if k in node.inputs)
    c = np.arange(np.prod(X), dtype=np.float32).reshape(X)
    kw = {"constant_values": 0.5} if mode == "constant" else {}
    np.testing.assert_array_equal(const, np.pad(c, [(0, 0), (0, 0), (1, 2), (2, 1)], mode=mode, **kw))
