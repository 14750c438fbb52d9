"""The AI CPU fallback's build-time half (issue 19): an op with no AI Core kernel becomes an `aicpu` host step
between AI Core launches instead of a refusal, logged, listed by `kiln analyze`, costed, and refused by the C++
runtime's build; issue 19's own operators never go there; what cannot run on the AI CPU either stays refused
naming the node. tests/kiln/op_cases/aicpu.py runs such models against ONNX Runtime."""
import base64

import numpy as np
import pytest
from conftest import REPO
from single_node import refusal

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from codegen import KilnError  # noqa: E402
from codegen.analyze import analyze, format_text  # noqa: E402
from codegen.cost.aicpu import AI_CPUS, aicpu_cycles  # noqa: E402
from codegen.emit.render import CppApi, render  # noqa: E402
from codegen.frontend import onnx_aicpu, onnx_import  # noqa: E402
from codegen.frontend.onnx_argmax import OPS_HERE as ARG_OPS  # noqa: E402
from codegen.frontend.onnx_depth_space import OPS_HERE as DEPTH_SPACE_OPS  # noqa: E402
from codegen.frontend.onnx_norm import OPS_HERE as NORM_OPS  # noqa: E402
from codegen.frontend.onnx_ops import OPS  # noqa: E402
from codegen.ir.graph import Graph, Node, Value  # noqa: E402
from codegen.ir.optlog import OptLog  # noqa: E402
from codegen.ir.profiles import get_profile  # noqa: E402
from codegen.options import parse_options  # noqa: E402
from codegen.passes.eltwise_programs import CHAIN_OPS  # noqa: E402
from codegen.passes.lowering import _Lowerer  # noqa: E402
from codegen.pipeline import plan, plan_model  # noqa: E402


def _save(path, nodes, inputs, outputs, init, opset=17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              outputs, [numpy_helper.from_array(np.asarray(v), k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def conv_cumsum_conv(tmp_path):
    """Conv+Relu -> CumSum (no kernel) -> 1x1 Conv -> Round (no kernel): AI CPU steps inside and at the end."""
    rng = np.random.default_rng(0)
    init = {"w": rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "axis": np.array(3, np.int64),
            "w2": rng.standard_normal((8, 16, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("CumSum", ["r", "axis"], ["s"], name="cumsum"),
             helper.make_node("Conv", ["s", "w2"], ["c2"], name="conv2"),
             helper.make_node("Round", ["c2"], ["y"], name="round")]
    return _save(tmp_path / "mix.onnx", nodes, [("x", [1, 8, 6, 6])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 6, 6])], init)


def test_ops_without_a_kernel_become_logged_aicpu_steps(tmp_path):
    graph = onnx_import.load_onnx(conv_cumsum_conv(tmp_path))
    assert graph.aicpu == {"cumsum": "no_kernel", "round": "no_kernel"}
    log = OptLog()
    stages = plan_model(graph, "mix", parse_options({"KILN_MODELS": ""}), log)
    steps = stages.lowered.steps
    assert [(s.kind, s.name) for s in steps if s.kind != "glue"] == [
        ("kernel", "conv"), ("aicpu", "cumsum"), ("kernel", "conv2"), ("aicpu", "round")]
    assert "[OPT] lowering mix:cumsum aicpu reason=no_kernel op=CumSum" in log.lines
    assert "[OPT] lowering mix:round aicpu reason=no_kernel op=Round" in log.lines
    # the boundary: the AI CPU reads rows (a relayout from NC1HWC0 first), the next Conv gets NC1HWC0 back
    cumsum = next(i for i, s in enumerate(steps) if s.name == "cumsum")
    assert steps[cumsum - 1].glue == "to_nchw" and steps[cumsum + 1].glue == "to_nc1hwc0"
    assert stages.lowered.storage[steps[cumsum].output].layout == "ND"
    # the host op is the node alone, its constant axis inside: evaluated it is CumSum over W
    host = steps[cumsum].host
    assert host is not None and host.elements == 2 * 16 * 6 * 6
    x = np.random.default_rng(1).standard_normal((1, 16, 6, 6)).astype(np.float32)
    (y,) = ReferenceEvaluator(onnx.load_from_string(host.model)).run(None, {"r": x})
    np.testing.assert_allclose(y, np.cumsum(x, axis=3), rtol=1e-6)


def test_aicpu_cost_is_the_stated_model():
    p = get_profile("ascend910b")
    cpu = AI_CPUS["ascend910b"]
    assert cpu.cores == 6  # Ascend910B2.ini ai_cpu_cnt (docs/ascend-model.md, "AI CPU")
    sync = cpu.sync_us * 1e3 * p.clock_ghz
    assert aicpu_cycles(0, p) == pytest.approx(sync)
    assert aicpu_cycles(6000, p) - aicpu_cycles(0, p) == pytest.approx(6000 * cpu.cycles_per_element / 6, rel=1e-6)
    assert aicpu_cycles(1000, get_profile("ascend310p")) > 0


def test_analyze_lists_the_aicpu_nodes_and_their_cost(tmp_path):
    r = analyze(conv_cumsum_conv(tmp_path), prediction=True)
    assert r["unsupported"] == [] and r["supported"]
    assert [(a["node"], a["op_type"], a["reason"]) for a in r["aicpu"]] == [
        ("cumsum", "CumSum", "no_kernel"), ("round", "Round", "no_kernel")]
    pr = r["prediction"]
    assert [a["step"] for a in pr["aicpu_steps"]] == ["cumsum", "round"] and pr["kernel_launches"] == 2
    assert pr["aicpu_cycles"] == pytest.approx(aicpu_cycles(1152, get_profile("ascend910b"))
                                               + aicpu_cycles(576, get_profile("ascend910b")))
    text = format_text(r)
    assert "AI CPU      2 node(s) run on the AI CPU" in text
    assert "node 'cumsum' (CumSum): reason=no_kernel, 1152 elements" in text


def test_the_manifest_carries_the_host_op_and_the_cpp_runtime_refuses_it(tmp_path):
    import json

    from codegen.ir.manifest import ModelRecord
    p = plan(parse_options({"KILN_MODELS": str(conv_cumsum_conv(tmp_path))}), REPO, tmp_path, kernel_list=False)
    entry = json.loads(render(p)["manifest.json"])["models"][0]  # kiln's own build (the Python runtime) takes it
    rec = ModelRecord.from_json(entry)
    assert rec.to_json() == entry and rec.kernel_launches == 2
    host = [s for s in rec.steps if s.is_aicpu]
    assert [s.name for s in host] == ["cumsum", "round"] and all(s.glue == 6 and s.host for s in host)
    model = onnx.load_from_string(base64.b64decode(host[0].host.model))
    assert [n.op_type for n in model.graph.node] == ["CumSum"] and host[0].host.reason == "no_kernel"
    assert host[0].host.predicted_cycles == aicpu_cycles(1152, get_profile("ascend910b"))
    with pytest.raises(KilnError, match=r"node 'cumsum' \(CumSum\); node 'round' \(Round\) run\(s\) on the AI CPU "
                                        r"fallback.*the C\+\+ runtime has no AI CPU"):
        render(p, cpp_api=CppApi("net", tmp_path / "gen"))


def _single(tmp_path, op, shape=(2, 16), out_type=TensorProto.FLOAT, init=None, **attrs):
    init = init or {}
    node = helper.make_node(op, ["x", *init], ["y"], name="the_node", **attrs)
    return _save(tmp_path / f"{op}.onnx", [node], [("x", list(shape))],
                 [helper.make_tensor_value_info("y", out_type, None)], init)


@pytest.mark.parametrize("op, out_type, attrs, reason", [
    ("EyeLike", TensorProto.INT64, {"dtype": TensorProto.INT64}, "its output 'y' has element type int64"),
    ("NonZero", TensorProto.INT64, {}, "the shape of its output 'y' is not static"),
])
def test_what_the_aicpu_cannot_run_either_stays_refused(tmp_path, op, out_type, attrs, reason):
    msg = refusal(_single(tmp_path, op, out_type=out_type, **attrs))
    assert msg.startswith(f"op type {op} is not supported by an AI Core kernel, and it cannot run on the AI CPU") \
        and reason in msg


def test_topk_indices_in_use_are_refused(tmp_path):
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"], name="the_node")
    path = _save(tmp_path / "topk.onnx", [node], [("x", [2, 16])],
                 [helper.make_tensor_value_info("v", TensorProto.FLOAT, None),
                  helper.make_tensor_value_info("i", TensorProto.INT64, None)], {"k": np.array([3], np.int64)})
    assert "output(s) 'i' are used, and an AI CPU step passes on its first output only" in refusal(path)


def test_an_ai_core_op_with_unsupported_attributes_is_refused_not_sent_to_the_aicpu(tmp_path):
    path = _single(tmp_path, "MaxPool", (1, 4, 9, 9), kernel_shape=[3, 3], storage_order=1)
    assert "storage_order=1 is not supported" in refusal(path)
    # and a custom-domain op stays refused
    node = helper.make_node("Foo", ["x"], ["y"], name="the_node", domain="com.example")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    onnx.save(model, tmp_path / "foo.onnx")
    assert "custom domains are not supported" in refusal(tmp_path / "foo.onnx")


# Issue 19's operators: never the AI CPU (each has an AI Core kernel, or is refused until it has one). The list is
# onnx_aicpu.ISSUE19_OPS, which the helpers adding those kernels extend.
ISSUE19 = sorted(onnx_aicpu.ISSUE19_OPS.items())


@pytest.mark.parametrize("op, status", ISSUE19, ids=[op for op, _ in ISSUE19])
def test_issue19_ops_are_never_routed_to_the_aicpu(op, status):
    node = Node("n", op, ["x"], ["y"], {})
    g = Graph("g", [Value("x", (2, 16))], [Value("y", (2, 16))], [node],
              {"x": Value("x", (2, 16)), "y": Value("y", (2, 16))}, {}, 17)
    entry = OPS.get(op)
    assert not onnx_aicpu.is_candidate(node, None if entry is None else entry.build_time_only, g)


@pytest.mark.parametrize("op, status", [
    pytest.param(op, status, marks=pytest.mark.xfail(reason=f"issue 19, {status}", strict=True))
    if status != "kernel" else (op, status) for op, status in ISSUE19], ids=[op for op, _ in ISSUE19])
def test_issue19_ops_have_an_ai_core_kernel(op, status):
    entry = OPS.get(op)
    assert entry is not None and not entry.build_time_only, f"{op}: no run-time entry in the op table"
    rewritten = (*DEPTH_SPACE_OPS, *NORM_OPS, *ARG_OPS)  # frontend passes rewrite these into lowered ops
    assert op in _Lowerer.LOWER or op in CHAIN_OPS or op in rewritten, f"{op}: no lowering rule"


def test_an_op_outside_the_list_with_a_reference_is_a_candidate():
    g = Graph("g", [], [], [], {}, {}, 17)
    for op in ("CumSum", "Round", "Sign", "Einsum", "TopK", "Hardmax"):
        assert onnx_aicpu.is_candidate(Node("n", op, ["x"], ["y"], {}), None, g), op
    assert not onnx_aicpu.is_candidate(Node("n", "NoSuchOp", ["x"], ["y"], {}), None, g)
    assert not onnx_aicpu.is_candidate(Node("n", "Relu", ["x"], ["y"], {}), False, g)  # has a kernel
