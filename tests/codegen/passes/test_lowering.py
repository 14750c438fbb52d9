"""Lowering on graphs as exporters write them: which steps a graph becomes."""
from collections import Counter

import pytest

pytest.importorskip("onnx")
from test_frontend import bert_layer  # the torch-exporter style BERT layer (decomposed LayerNorm and GELU)

from codegen.frontend import onnx_import as onnx_frontend
from codegen.passes import lowering
from codegen.passes.patterns import find_patterns


@pytest.mark.parametrize("opset", [17, 18])
def test_exported_bert_layer_lowers_patterns_to_single_kernels(tmp_path, opset):
    g = onnx_frontend.load_onnx(bert_layer(tmp_path, opset), batch=1)
    m = lowering.lower(g, "bert_torch")
    kinds = Counter(s.instance.type for s in m.steps if s.kind == "kernel")
    # 6 GEMMs with folded bias, 2 batched GEMMs, 2 LayerNorms (one decomposed), 1 GELU (decomposed)
    assert kinds["Gemm"] == 6 and kinds["BatchedMatMul"] == 2 and kinds["LayerNormalization"] == 2
    assert kinds["Gelu"] == 1 and kinds["Softmax"] == 1 and "Pow" not in kinds and "Erf" not in kinds
    ln = [s for s in m.steps if s.kind == "kernel" and s.instance.type == "LayerNormalization"]
    assert ln[0].instance.attrs["epsilon"] == pytest.approx(1e-12) and len(ln[0].ops) == 9
    assert any("compute LayerNormalization" in d for d in m.decisions)
    assert any("compute GELU" in d for d in m.decisions)


def test_chain_that_is_not_layernorm_is_not_matched(tmp_path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    # x - mean(x), squared, averaged, + eps, sqrt: missing the division -> not a layernorm
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 1])
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1], name="mean"),
             helper.make_node("Sub", ["x", "m"], ["d"], name="sub"),
             helper.make_node("Mul", ["d", "d"], ["d2"], name="sq"),
             helper.make_node("ReduceMean", ["d2"], ["v"], axes=[-1], name="var"),
             helper.make_node("Add", ["v", "eps"], ["ve"], name="addeps"),
             helper.make_node("Sqrt", ["ve"], ["y"], name="std")]
    eps = numpy_helper.from_array(np.array(1e-5, np.float32), "eps")
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [eps]),
                              opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "std.onnx"
    onnx.save(model, str(path))
    g = onnx_frontend.load_onnx(path)
    # every node lowers on its own (Sqrt is an elementwise-program op since issue 19): none left unsupported
    assert [n.name for n in lowering.unsupported_nodes(g, "std")] == []
    # not matched: "mean" and "var" stay ReduceMean nodes (each lowers on its own: a mean over the last axis)
    assert not find_patterns(g).layernorm_chain
