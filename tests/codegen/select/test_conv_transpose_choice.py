"""ConvTranspose's form (codegen/passes/conv_transpose.py) chosen by the cost model (codegen/select/conv_transpose.py):
the [OPT] line prices every form, the cheapest built one is lowered, and what the chooser prices is exactly what
lowering then launches (the same op specs)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen.analyze import AnalysisSettings, analysis_options  # noqa: E402
from codegen.frontend import onnx_import  # noqa: E402
from codegen.ir.opspec import opspec_of  # noqa: E402
from codegen.ir.optlog import OptLog  # noqa: E402
from codegen.passes.lowering import lower  # noqa: E402
from codegen.passes.patterns import find_patterns  # noqa: E402
from codegen.pipeline import plan_model  # noqa: E402


def model(tmp_path, x, cout, k, relu=False, **attrs):
    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.standard_normal((x[1], cout, k, k)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b")]
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["c" if relu else "y"], name="up", **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="act"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], init)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "convt.onnx"
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("x, cout, k, attrs, form, launches", [
    ([1, 16, 6, 7], 8, 2, {"strides": [2, 2]}, "gemm_depth_to_space", 2),           # DBNet's up-conv
    ([1, 8, 5, 6], 12, 4, {"strides": [2, 2], "pads": [1, 1, 1, 1]}, "gemm_col2im", 2),  # U-Net's: overlapping
    ([1, 8, 5, 6], 12, 3, {"pads": [1, 1, 1, 1]}, "stride_phase", 1),  # stride 1: one convolution
])
def test_form_by_the_cost_model(tmp_path, x, cout, k, attrs, form, launches):
    log = OptLog()
    stages = plan_model(onnx_import.load_onnx(model(tmp_path, x, cout, k, relu=True, **attrs)), "m",
                        analysis_options(AnalysisSettings()), log, memory=False)
    (line,) = [ln for ln in log.lines if "conv_transpose=" in ln]
    assert f"m:up conv_transpose={form} reason=cost_model" in line
    fields = dict(f.split("=", 1) for f in line.split()[5:])
    estimated = fields["estimated"].split(",")
    built = [f[:-len("_cycles")] for f in fields if f.endswith("_cycles") and f[:-len("_cycles")] not in estimated]
    assert "gemm_col2im" in built and form in built and "gemm_col2im" not in estimated
    assert int(fields[f"{form}_cycles"]) == min(int(fields[f"{f}_cycles"]) for f in built)
    assert len(stages.specs) == launches
    kernels = [s.kernel_op for s in stages.lowered.steps if s.kind == "kernel"]
    takes_relu = [op for op in kernels if op.type == ("Col2im" if form == "gemm_col2im" else "Conv")]
    assert takes_relu and all(op.attrs["activation"] == "Relu" for op in takes_relu)  # the ReLU once per pixel
    assert all(op.attrs["activation"] == "" for op in kernels if op not in takes_relu)


@pytest.mark.parametrize("form", ["stride_phase", "gemm_depth_to_space", "gemm_col2im"])
def test_priced_instances_are_the_launched_kernels(tmp_path, form):
    graph = onnx_import.load_onnx(model(tmp_path, [2, 6, 4, 5], 20, 2, strides=[2, 2]))
    priced = {}

    def choose(node, g, built):
        priced.update(built)
        return form
    lowered = lower(graph, "m", "fp16", find_patterns(graph), choose)
    launched = [opspec_of(s.kernel_op) for s in lowered.steps if s.kind == "kernel"]
    assert launched == [opspec_of(op) for op in priced[form]]
    assert set(priced) == {"stride_phase", "gemm_depth_to_space", "gemm_col2im"}
