"""The built-in model zoo: valid ONNX with the expected topology, reproducible,
and -- the point of calibrating the random weights -- a live signal: every
intermediate tensor stays well inside fp16 range, none collapses to zero, and
the outputs depend on the input."""
import collections

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import codegen.frontend.zoo as zoo  # noqa: E402

OUTPUTS = {"resnet50": ("input", ["batch", 3, 224, 224], "logits", ["batch", 1000]),  # batch bound when baked
           "mobilenet_v2": ("input", ["batch", 3, 224, 224], "logits", ["batch", 1000]),
           "bert_layer": ("hidden_states", [1, 128, 768], "output", [1, 128, 768])}
CLASSIFIERS = ("resnet50", "mobilenet_v2")
INPUT_SEEDS = (101, 102)
WEIGHTED = ("Conv", "BatchNormalization", "Gemm", "MatMul")

_built: dict = {}


def built(name: str):
    """Each model is built once per test session (seed 0)."""
    if name not in _built:
        _built[name] = zoo.build(name)
    return _built[name]


def session(model, optimize=True):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 2, 1
    if not optimize:  # run the graph as written, so every node's output exists
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def inputs(name):
    _, shape, _, _ = OUTPUTS[name]
    shape = [1 if d == "batch" else d for d in shape]
    return [np.random.default_rng(s).standard_normal(shape).astype(np.float32) for s in INPUT_SEEDS]


def with_all_outputs(model):
    """A copy of ``model`` with every node output also a graph output."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for out in node.output:
            if out not in have:
                m.graph.output.append(onnx.helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, None))
    return m


def nodes_by_name(model):
    return {n.name: n for n in model.graph.node}


def attr(node, key):
    return next(onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == key)


@pytest.mark.parametrize("name", zoo.ZOO)
def test_valid_onnx_with_named_io_and_unique_node_names(name):
    m = built(name)
    onnx.checker.check_model(m, full_check=True)
    assert m.ir_version in (8, 9)
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 17)]
    in_name, in_shape, out_name, out_shape = OUTPUTS[name]
    dims = lambda vi: [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim]  # noqa: E731
    assert [(i.name, dims(i)) for i in m.graph.input] == [(in_name, in_shape)]
    assert [(o.name, dims(o)) for o in m.graph.output] == [(out_name, out_shape)]
    names = [n.name for n in m.graph.node]
    assert all(names) and len(set(names)) == len(names)
    inits = [t.name for t in m.graph.initializer]
    assert len(set(inits)) == len(inits)


def test_resnet50_topology():
    m = built("resnet50")
    hist = collections.Counter(n.op_type for n in m.graph.node)
    assert hist == {"Conv": 53, "BatchNormalization": 53, "Relu": 49, "Add": 16, "MaxPool": 1,
                    "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    by = nodes_by_name(m)
    consumers = collections.defaultdict(list)
    for n in m.graph.node:
        for i in n.input:
            consumers[i].append(n)
    for n in m.graph.node:
        if n.op_type == "Conv":  # bias-free, always followed by its own BN
            assert len(n.input) == 2
            assert [c.op_type for c in consumers[n.output[0]]] == ["BatchNormalization"]
    assert attr(by["conv1"], "kernel_shape") == [7, 7] and attr(by["conv1"], "strides") == [2, 2]
    assert attr(by["maxpool"], "pads") == [1, 1, 1, 1]
    # v1.5: the stride of a downsampling block sits on its 3x3 conv
    for layer in (2, 3, 4):
        assert attr(by[f"layer{layer}.0.conv1"], "strides") == [1, 1]
        assert attr(by[f"layer{layer}.0.conv2"], "strides") == [2, 2]
        assert attr(by[f"layer{layer}.0.downsample.0"], "strides") == [2, 2]
    assert attr(by["layer1.0.downsample.0"], "strides") == [1, 1]
    assert "layer1.1.downsample.0" not in by and "layer4.2.relu3" in by
    fc = {t.name: t for t in m.graph.initializer}["fc.weight"]
    assert list(fc.dims) == [1000, 2048] and attr(by["fc"], "transB") == 1


def test_mobilenet_v2_topology():
    m = built("mobilenet_v2")
    hist = collections.Counter(n.op_type for n in m.graph.node)
    assert hist == {"Conv": 52, "BatchNormalization": 52, "Clip": 35, "Add": 10,
                    "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    by = nodes_by_name(m)
    depthwise = [n for n in m.graph.node if n.op_type == "Conv" and attr(n, "group") > 1]
    assert len(depthwise) == 17
    assert attr(by["features.1.conv.0.0"], "group") == 32          # t = 1: no expansion conv
    assert attr(by["features.3.conv.1.0"], "group") == 144         # 24 * 6
    assert attr(by["features.2.conv.1.0"], "strides") == [2, 2]
    assert "features.3.add" in by and "features.2.add" not in by   # residual only when shapes match
    assert by["features.18.0"].op_type == "Conv" and by["classifier.1"].op_type == "Gemm"
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    for clip in (n for n in m.graph.node if n.op_type == "Clip"):   # ReLU6, bounds as inputs
        assert (float(consts[clip.input[1]]), float(consts[clip.input[2]])) == (0.0, 6.0)


def test_bert_layer_topology():
    m = built("bert_layer")
    hist = collections.Counter(n.op_type for n in m.graph.node)
    assert hist == {"MatMul": 8, "Add": 9, "Reshape": 4, "Transpose": 4, "Div": 2, "Softmax": 1,
                    "LayerNormalization": 2, "Erf": 1, "Mul": 2}
    by = nodes_by_name(m)
    consts = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    assert attr(by["attention.self.key.Transpose"], "perm") == [0, 2, 3, 1]
    assert attr(by["attention.self.query.Transpose"], "perm") == [0, 2, 1, 3]
    assert consts[by["attention.self.query.Reshape"].input[1]].tolist() == [1, 128, 12, 64]
    assert consts[by["attention.self.context.Reshape"].input[1]].tolist() == [1, 128, 768]
    assert consts[by["attention.self.query.Reshape"].input[1]].dtype == np.int64
    assert float(consts[by["attention.self.scores.Div"].input[1]]) == 8.0
    assert consts["intermediate.dense.weight"].shape == (768, 3072)
    for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
        assert attr(by[ln], "epsilon") == pytest.approx(1e-12) and len(by[ln].input) == 3


@pytest.mark.parametrize("name", zoo.ZOO)
def test_signal_is_alive_and_depends_on_the_input(name):
    model = built(name)
    in_name, _, out_name, _ = OUTPUTS[name]
    xs = inputs(name)

    # The output, through onnxruntime's optimised graph.
    plain = session(model)
    ys = [plain.run([out_name], {in_name: x})[0] for x in xs]
    for y in ys:
        assert np.all(np.isfinite(y))
        assert 0.1 <= y.std() <= 100, y.std()
    rel = np.linalg.norm(ys[0] - ys[1]) / np.linalg.norm(ys[0])
    assert rel > 0.05, f"output hardly depends on the input (relative difference {rel:.3g})"
    if name in CLASSIFIERS:
        assert ys[0].argmax() != ys[1].argmax()

    # Every intermediate tensor, through the graph as written.
    full = with_all_outputs(model)
    op_of = {n.output[0]: (n.op_type, n.name) for n in model.graph.node}
    sess = session(full, optimize=False)
    names = [o.name for o in sess.get_outputs()]
    for x, y in zip(xs, ys):
        values = dict(zip(names, sess.run(None, {in_name: x})))
        np.testing.assert_allclose(values[out_name], y, rtol=1e-3, atol=1e-3 * float(np.abs(y).max()))
        for tensor, v in values.items():
            op, node = op_of[tensor]
            assert np.all(np.isfinite(v)), node
            assert np.any(v != 0), f"{node} ({op}) is all zero"
            assert np.abs(v).max() <= 1000, f"{node} ({op}) reaches {np.abs(v).max():.3g}, too close to fp16 max"
            if op in WEIGHTED:
                assert 0.05 <= v.std() <= 20, f"{node} ({op}) std {v.std():.3g}"
        if name == "bert_layer":  # attention neither uniform nor one-hot
            probs = values["attention.self.Softmax"]
            top = probs.max(axis=-1).mean()
            assert 3 / 128 < top < 0.8, top
            entropy = -(probs * np.log(probs + 1e-30)).sum(axis=-1).mean()
            assert entropy < np.log(128) - 0.3, entropy


@pytest.mark.parametrize("name", zoo.ZOO)
def test_same_seed_same_bytes_other_seed_other_weights(name):
    a = built(name)
    assert zoo.build(name, seed=0).SerializeToString() == a.SerializeToString()
    b = zoo.build(name, seed=1)
    # Same graph, different weights.
    assert [(n.name, n.op_type, list(n.input)) for n in b.graph.node] == \
           [(n.name, n.op_type, list(n.input)) for n in a.graph.node]
    wa = {t.name: onnx.numpy_helper.to_array(t) for t in a.graph.initializer}
    wb = {t.name: onnx.numpy_helper.to_array(t) for t in b.graph.initializer}
    assert wa.keys() == wb.keys()
    big = [k for k, v in wa.items() if v.size > 1000]
    assert big and all(not np.array_equal(wa[k], wb[k]) for k in big)


def test_write_is_atomic_and_loadable(tmp_path):
    out = zoo.write("bert_layer", tmp_path / "models" / "bert.onnx", seed=0)
    assert out == tmp_path / "models" / "bert.onnx"
    assert out.read_bytes() == built("bert_layer").SerializeToString()
    assert [p.name for p in out.parent.iterdir()] == ["bert.onnx"]   # no temp file left behind
    onnx.checker.check_model(onnx.load(str(out)))
    # A directory gets <name>.onnx; rewriting replaces the file in place.
    assert zoo.write("bert_layer", out.parent, seed=3) == out.parent / "bert_layer.onnx"
    assert zoo.write("bert_layer", out, seed=3).read_bytes() == (out.parent / "bert_layer.onnx").read_bytes()
    assert sorted(p.name for p in out.parent.iterdir()) == ["bert.onnx", "bert_layer.onnx"]


def test_unknown_model_is_named():
    with pytest.raises(zoo.KilnError, match=r"resnet51.*resnet50, mobilenet_v2, bert_layer"):
        zoo.build("resnet51")
