"""Opsets 7..12 (issue 17): converted to opset 13 with onnx's version converter before import, the decision in the
frontend log and, for a baked model, in the [OPT] log (reason opset_converted); a conversion failure names the
node it fails on."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402
from test_frontend import init, save, tensor  # noqa: E402

from codegen import KilnError  # noqa: E402
from codegen.frontend import onnx_import as onnx_frontend  # noqa: E402
from codegen.ir.optlog import REASONS  # noqa: E402


def old_model(tmp_path, opset):
    # opset-7-era spellings: Dropout with `ratio` (an attribute up to opset 11, an input from 12), Reshape to a
    # constant shape, Gemm with transB; converted they must compute what the file computes
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="gemm", transB=1),
             helper.make_node("Relu", ["g"], ["r"], name="relu"),
             helper.make_node("Dropout", ["r"], ["d"], name="dropout", **({"ratio": 0.25} if opset < 12 else {})),
             helper.make_node("Reshape", ["d", "shape"], ["y"], name="reshape")]
    rng = np.random.default_rng(0)
    inits = [init("w", rng.standard_normal((6, 4)).astype(np.float32)), init("b", np.zeros(6, np.float32)),
             init("shape", np.array([2, 3, 2], np.int64))]
    return save(tmp_path, nodes, [tensor("x", [2, 4])], [tensor("y", None)], inits, opset=opset,
                name=f"old{opset}.onnx")


@pytest.mark.parametrize("opset", [7, 9, 11, 12])
def test_old_opsets_are_converted_and_logged(tmp_path, opset):
    log = []
    g = onnx_frontend.load_onnx(old_model(tmp_path, opset), log=log)
    assert g.opset == 13 and g.source_opset == opset
    assert [n.op_type for n in g.nodes] == ["Gemm", "Relu", "Reshape"] and g.outputs[0].shape == (2, 3, 2)
    assert f"opset: converted from opset {opset} to 13 with onnx's version converter" in log


def test_native_opsets_are_not_converted(tmp_path):
    g = onnx_frontend.load_onnx(old_model(tmp_path, 13))
    assert g.opset == 13 and g.source_opset == 0


def test_conversion_is_an_opt_log_decision(tmp_path):
    from codegen.frontend.model_spec import parse_model_spec
    from codegen.ir.optlog import OptLog
    from codegen.pipeline import _log_frontend
    log = OptLog()
    path = old_model(tmp_path, 9)
    _log_frontend(onnx_frontend.load_onnx(path), "old9", parse_model_spec(f"{path}@x=2x4"), log)
    assert log.lines == ["[OPT] frontend old9 opset=9->13 reason=opset_converted converter=onnx.version_converter",
                         "[OPT] frontend old9 input=x reason=pinned_shape shape=2x4"]
    assert "opset_converted" in REASONS and "pinned_shape" in REASONS


def test_conversion_failure_names_the_node(tmp_path):
    # the version converter's Scan 8 -> 9 adapter takes only a Scan without sequence_lens (input 0): it fails on
    # this (valid) node, and the error names it rather than the file
    body = helper.make_graph([helper.make_node("Add", ["s", "e"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["y_e"])], "body",
                             [tensor("s", [4]), tensor("e", [4])], [tensor("s_out", [4]), tensor("y_e", [4])])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Scan", ["lens", "s0", "r"], ["s_final", "y"], name="the_scan", body=body,
                              num_scan_inputs=1)]
    inits = [init("lens", np.array([3], np.int64)), init("s0", np.zeros((1, 4), np.float32))]
    path = save(tmp_path, nodes, [tensor("x", [1, 3, 4])], [tensor("s_final", None), tensor("y", None)], inits,
                opset=8)
    with pytest.raises(KilnError) as e:
        onnx_frontend.load_onnx(path)
    assert "node 'the_scan' (Scan, opset 8)" in str(e.value) and "version converter cannot convert it" in str(e.value)
    assert e.value.__cause__ is None
