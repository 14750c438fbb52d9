"""The fusion stage on small models built here: kernel counts and log lines under
ENABLE_FUSION=OFF, MAX_FUSION_DEPTH=1 and the defaults (plans only, no build)."""
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

try:
    from kiln.codegen.options import parse_options
    from kiln.codegen.pipeline import plan
except ImportError:
    from codegen.options import parse_options
    from codegen.pipeline import plan
from conftest import REPO  # noqa: E402

RNG = np.random.default_rng(0)


def small_cnn(path):
    """conv+bn+relu -> depthwise+clip6 -> conv+clip6 -> conv, + residual add + relu."""
    inits, nodes = [], []

    def w(name, shape):
        inits.append(numpy_helper.from_array((RNG.standard_normal(shape) * 0.2).astype(np.float32), name))
        return name

    def bn(x, name, c):
        for p, v in (("g", 1.0), ("b", 0.0), ("m", 0.0), ("v", 1.0)):
            inits.append(numpy_helper.from_array(np.full(c, v, np.float32), f"{name}.{p}"))
        nodes.append(helper.make_node("BatchNormalization", [x] + [f"{name}.{p}" for p in "gbmv"], [name], name=name))
        return name

    def six():
        inits.append(numpy_helper.from_array(np.array(0.0, np.float32), "zero"))
        inits.append(numpy_helper.from_array(np.array(6.0, np.float32), "six"))
    six()
    nodes.append(helper.make_node("Conv", ["x", w("c1.w", (16, 8, 3, 3))], ["c1"], name="c1", pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", [bn("c1", "bn1", 16)], ["r1"], name="relu1"))
    nodes.append(helper.make_node("Conv", ["r1", w("dw.w", (16, 1, 3, 3))], ["dw"], name="dw", pads=[1, 1, 1, 1], group=16))
    nodes.append(helper.make_node("Clip", ["dw", "zero", "six"], ["d6"], name="dw_relu6"))
    nodes.append(helper.make_node("Conv", ["d6", w("pw.w", (16, 16, 1, 1))], ["pw"], name="pw"))
    nodes.append(helper.make_node("Clip", ["pw", "zero", "six"], ["p6"], name="pw_relu6"))
    nodes.append(helper.make_node("Conv", ["p6", w("c2.w", (16, 16, 1, 1))], ["c2"], name="c2"))
    nodes.append(helper.make_node("Add", ["c2", "r1"], ["s"], name="residual"))
    nodes.append(helper.make_node("Relu", ["s"], ["y"], name="relu_out"))
    g = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 12, 12])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def model_plan(tmp_path, **opts):
    path = small_cnn(tmp_path / "small.onnx")
    options = {"KILN_MODELS": str(path), "KILN_KERNEL_LIST": str(tmp_path / "empty.toml"),
               "DEBUG_OPTIMIZATION_PATH": "ON", **opts}
    (tmp_path / "empty.toml").write_text('[[op]]\nlabel = "k"\ntype = "Relu"\nshape = [16]\n')
    p = plan(parse_options(options), REPO, tmp_path)
    (m,) = p.models
    launches = sum(1 for s in m.lowered.steps if s.kind == "kernel")
    return m, launches, [line for line in p.log.lines if line.startswith("[OPT] fusion")]


def test_default_fuses_what_the_profile_allows(tmp_path):
    m, launches, lines = model_plan(tmp_path)
    # 4 convs + relu + clip + clip + add + relu = 9 ops -> 4 kernels:
    # conv+bn+relu (Fixpipe), dw+clip (its Vector pass), pw+clip and c2+add+relu (Vector-core pass after the Cube)
    assert launches == 4
    assert any(re.search(r"small:relu1 Fused\(Conv\+BN\+Relu\) reason=epilogue_fixpipe", ln) for ln in lines), lines
    assert any("small:dw_relu6 Fused(Conv+Clip) reason=epilogue_vector " in ln for ln in lines)
    assert any("small:pw_relu6 Fused(Conv+Clip) reason=epilogue_vector_core" in ln for ln in lines)
    assert any("small:residual Fused(Conv+Add) reason=epilogue_vector_core into=c2" in ln for ln in lines)
    assert any("small:relu_out Fused(Conv+Add+Relu) reason=epilogue_vector_core" in ln for ln in lines)
    assert m.fusion.audit == []


def test_fusion_off_gives_one_kernel_per_op(tmp_path):
    m, launches, lines = model_plan(tmp_path, ENABLE_FUSION="OFF")
    assert launches == 9
    assert all("reason=fusion_off" in ln for ln in lines) and len(lines) == 5


def test_depth_one_rejects_with_the_limit(tmp_path):
    m, launches, lines = model_plan(tmp_path, MAX_FUSION_DEPTH="1")
    assert launches == 9
    assert sum("reason=depth_limit" in ln for ln in lines) == 5 == len(lines)


def test_log_is_byte_identical_across_runs(tmp_path):
    a = model_plan(tmp_path / "a" if (tmp_path / "a").mkdir() is None else None)[2]
    b = model_plan(tmp_path / "b" if (tmp_path / "b").mkdir() is None else None)[2]
    assert [re.sub(r"/tmp\S*", "", x) for x in a] == [re.sub(r"/tmp\S*", "", x) for x in b]
