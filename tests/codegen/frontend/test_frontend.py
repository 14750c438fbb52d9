"""The ONNX frontend: file -> kiln IR (binding, shape inference, folding passes,
op table, problem reporting) and kiln analyze, on the real MobileNetV2 export and
on small graphs built here with onnx.helper."""
import math
from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from conftest import model_file, models_dir  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen import KilnError, analyze  # noqa: E402
from codegen.frontend import onnx_import as onnx_frontend  # noqa: E402
from codegen.frontend.onnx_ops import OPS, infer_shapes  # noqa: E402

MOBILENET = models_dir() / "mobilenet_v2.onnx"  # the real torchvision export (conftest.model_file)
needs_mobilenet = pytest.mark.usefixtures("mobilenet_file")
BUILD_TIME_OPS = {"Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Cast", "Slice"}  # fold away in shape chains
RUNTIME_TOO = {"Gather", "Unsqueeze", "Squeeze", "Slice"}  # ... and are also lowered on run-time values (views)
RNG = np.random.default_rng(0)


# ---------------------------------------------------------------- helpers

def save(tmp_path, nodes, inputs, outputs, initializers=(), opset=17, name="model.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # readable by the installed onnxruntime
    path = tmp_path / name
    onnx.save(model, path)
    return path


def tensor(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def conv_nchw(x, w, b, strides, pads, dilations, group):
    """Plain NumPy grouped convolution in float64; pads (top, left, bottom, right)."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilations, pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, ho, wo))
    og = o // group
    for gi in range(group):
        xs, ws = xp[:, gi * cg:(gi + 1) * cg], w[gi * og:(gi + 1) * og].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh: i * dh + sh * (ho - 1) + 1: sh, j * dw: j * dw + sw * (wo - 1) + 1: sw]
                y[:, gi * og:(gi + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, i, j])
    return y + (0 if b is None else b[None, :, None, None])


def run_ir(graph, feeds):
    """Evaluate a kiln IR graph of the ops MobileNetV2 uses, from the IR's explicit attributes only."""
    env = dict(graph.initializers, **feeds)
    for n in graph.nodes:
        x, a = [env[i] for i in n.inputs], n.attrs
        if n.op_type == "Conv":
            y = conv_nchw(x[0], x[1], x[2] if len(x) > 2 else None, a["strides"], a["pads"], a["dilations"], a["group"])
        elif n.op_type == "Clip":
            y = np.clip(x[0], a["min"], a["max"])
        elif n.op_type == "Relu":
            y = np.maximum(x[0], 0)
        elif n.op_type == "Add":
            y = x[0] + x[1]
        elif n.op_type == "GlobalAveragePool":
            y = x[0].mean(axis=(2, 3), keepdims=True)
        elif n.op_type == "Flatten":
            y = x[0].reshape(int(np.prod(x[0].shape[:a["axis"]])), -1)
        elif n.op_type == "Gemm":
            b = x[1].T if a["transB"] else x[1]
            y = a["alpha"] * x[0] @ b + a["beta"] * x[2]
        elif n.op_type in ("MatMul", "Sub", "Mul", "Div", "Pow"):
            y = {"MatMul": np.matmul, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
                 "Pow": np.power}[n.op_type](x[0], x[1])
        elif n.op_type == "Sqrt":
            y = np.sqrt(x[0])
        elif n.op_type == "Erf":
            y = np.vectorize(math.erf)(x[0])
        elif n.op_type == "Reshape":
            y = x[0].reshape(a["shape"])
        elif n.op_type == "Transpose":
            y = x[0].transpose(a["perm"])
        elif n.op_type == "Softmax":
            e = np.exp(x[0] - x[0].max(axis=a["axis"], keepdims=True))
            y = e / e.sum(axis=a["axis"], keepdims=True)
        elif n.op_type == "ReduceMean":
            y = x[0].mean(axis=a["axes"], keepdims=bool(a["keepdims"]))
        elif n.op_type == "LayerNormalization":
            axes = tuple(range(a["axis"], x[0].ndim))
            d = x[0] - x[0].mean(axis=axes, keepdims=True)
            y = d / np.sqrt((d * d).mean(axis=axes, keepdims=True) + a["epsilon"]) * x[1] + x[2]
        else:
            raise NotImplementedError(n.op_type)
        env[n.outputs[0]] = y
    return [env[v.name] for v in graph.outputs]


def ort_run(path, feeds):
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


# ---------------------------------------------------------------- MobileNetV2 (real export)

@pytest.fixture
def mobilenet_file():
    """Fails under CI=true, else skips, when the export is missing (conftest.model_file)."""
    return model_file(MOBILENET.name)


@pytest.fixture(scope="module")
def mobilenet():
    model_file(MOBILENET.name)
    log = []
    return onnx_frontend.load_onnx(MOBILENET, log=log), log


@needs_mobilenet
def test_mobilenet_loads_with_static_shapes(mobilenet):
    g, log = mobilenet
    ops = Counter(n.op_type for n in g.nodes)
    assert ops["Conv"] == 52 and ops["Clip"] == 35 and ops["Add"] == 10
    assert not BUILD_TIME_OPS & set(ops), "shape arithmetic and constants must be folded away"
    assert [v.shape for v in g.inputs] == [(1, 3, 224, 224)]
    assert [(v.name, v.shape) for v in g.outputs] == [("output", (1, 1000))]
    for n in g.nodes:
        for name in n.inputs + n.outputs:
            shape = g.values[name].shape
            assert all(isinstance(d, int) and d > 0 for d in shape), (n.name, name, shape)
    assert all(a.dtype == np.float32 for a in g.initializers.values())
    assert set(g.initializers) <= {i for n in g.nodes for i in n.inputs}, "no unused initializers"
    assert any("Constant x70" in line for line in log)


@needs_mobilenet
def test_mobilenet_attributes_are_explicit(mobilenet):
    g, _ = mobilenet
    clips = [n for n in g.nodes if n.op_type == "Clip"]
    assert all(n.attrs == {"min": 0.0, "max": 6.0} and len(n.inputs) == 1 for n in clips)
    convs = [n for n in g.nodes if n.op_type == "Conv"]
    assert all(set(n.attrs) == {"kernel_shape", "strides", "pads", "dilations", "group"} for n in convs)
    depthwise = [n for n in convs if n.attrs["group"] > 1]
    assert len(depthwise) == 17
    assert all(g.initializers[n.inputs[1]].shape[1] == 1 for n in depthwise)
    gemm = next(n for n in g.nodes if n.op_type == "Gemm")
    assert gemm.attrs == {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 1}


@needs_mobilenet
def test_mobilenet_batch_2():
    g = onnx_frontend.load_onnx(MOBILENET, batch=2)
    assert g.inputs[0].shape == (2, 3, 224, 224) and g.outputs[0].shape == (2, 1000)
    assert all(v.shape[0] == 2 for v in g.values.values() if v.name not in g.initializers)


@needs_mobilenet
def test_kiln_shape_rules_agree_with_onnx_inference(mobilenet):
    g, _ = mobilenet
    for n in g.nodes:
        assert infer_shapes(n, g) == [g.values[o].shape for o in n.outputs], n.name


@needs_mobilenet
def test_mobilenet_ir_computes_what_onnxruntime_computes(mobilenet):
    g, _ = mobilenet
    x = RNG.standard_normal((1, 3, 224, 224)).astype(np.float32)
    (expect,) = ort_run(MOBILENET, {"input": x})
    (got,) = run_ir(g, {"input": x})
    np.testing.assert_allclose(got, expect, rtol=1e-3, atol=1e-3)


@needs_mobilenet
def test_analyze_mobilenet():
    r = analyze.analyze(MOBILENET)
    assert r["model"] == str(MOBILENET) and r["nodes"] == 170
    assert r["op_histogram"]["Constant"] == 70 and r["op_histogram"]["Conv"] == 52
    assert 0.55e9 < r["flops"] < 0.65e9            # ~300 M multiply-adds
    assert 13.5e6 < r["params_bytes"] < 14.5e6      # ~3.5 M float32 parameters
    assert r["unsupported"] == [] and r["ir_nodes"] == 100 and r["ir_op_histogram"]["Conv"] == 52
    text = analyze.format_text(r)
    assert "170" in text and "MFLOP" in text and "every node compiles" in text


# ---------------------------------------------------------------- passes on small graphs

@pytest.mark.parametrize("group,auto_pad", [(1, "NOTSET"), (8, "SAME_UPPER")])
def test_batchnorm_folds_into_conv_numerically(tmp_path, group, auto_pad):
    c_in, c_out = 8, 8 if group > 1 else 6
    w = RNG.standard_normal((c_out, c_in // group, 3, 3)).astype(np.float32)
    bias = RNG.standard_normal(c_out).astype(np.float32)
    gamma, beta = RNG.uniform(0.5, 2, c_out), RNG.standard_normal(c_out)
    mean, var = RNG.standard_normal(c_out), RNG.uniform(0.1, 2, c_out)
    conv_attrs = {"group": group, "strides": [2, 2]}
    conv_attrs.update({"auto_pad": auto_pad} if auto_pad != "NOTSET" else {"pads": [1, 0, 1, 2]})
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", **conv_attrs),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"], name="bn",
                              epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["y"], name="relu")]
    inits = [init("w", w), init("b", bias)] + [init(k, v.astype(np.float32)) for k, v in
                                               (("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var))]
    path = save(tmp_path, nodes, [tensor("x", ["N", c_in, 11, 12])], [tensor("y", None)], inits)

    g = onnx_frontend.load_onnx(path, batch=2)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu"]
    conv = g.nodes[0]
    assert conv.source == ["conv", "bn"] and conv.outputs == g.nodes[1].inputs
    x = RNG.standard_normal((2, c_in, 11, 12)).astype(np.float32)
    (expect,) = ort_run(path, {"x": x})
    a = conv.attrs
    got = np.maximum(conv_nchw(x, g.initializers[conv.inputs[1]], g.initializers[conv.inputs[2]],
                               a["strides"], a["pads"], a["dilations"], a["group"]), 0)
    assert got.shape == expect.shape == g.outputs[0].shape
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-4)


def test_same_upper_pads_are_explicit(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", auto_pad="SAME_UPPER", strides=[2, 2])]
    path = save(tmp_path, nodes, [tensor("x", [1, 3, 8, 7])], [tensor("y", None)],
                [init("w", np.ones((4, 3, 3, 3), np.float32))])
    conv = onnx_frontend.load_onnx(path).nodes[0]
    # out = ceil(8/2)=4: total pad 1 -> (0 top, 1 bottom); ceil(7/2)=4: total 2 -> (1 left, 1 right)
    assert conv.attrs["pads"] == (0, 1, 1, 1) and "auto_pad" not in conv.attrs
    assert conv.inputs == ["x", "w"]


def test_batchnorm_not_after_conv_is_kept(tmp_path):
    c = 4
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("BatchNormalization", ["r", "s", "b", "m", "v"], ["y"], name="bn")]
    inits = [init(k, np.ones(c, np.float32)) for k in "sbmv"]
    path = save(tmp_path, nodes, [tensor("x", [1, c, 5, 5])], [tensor("y", None)], inits)
    log = []
    g = onnx_frontend.load_onnx(path, log=log)
    assert [n.op_type for n in g.nodes] == ["Relu", "BatchNormalization"]
    assert g.nodes[1].attrs == {"epsilon": 1e-5}
    assert any("kept 'bn'" in line for line in log)


def test_shape_arithmetic_folds_to_static_reshape(tmp_path):
    # x.view(x.size(0), -1) as the torch exporter writes it, with a Cast and a Slice in the chain
    nodes = [helper.make_node("Shape", ["x"], ["shape"], name="shape"),
             helper.make_node("Gather", ["shape", "zero"], ["n"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsqueeze"),
             helper.make_node("Cast", ["minus_one_f"], ["minus_one"], name="cast", to=TensorProto.INT64),
             helper.make_node("Slice", ["minus_one", "s0", "s1"], ["rest"], name="slice"),
             helper.make_node("Concat", ["n1", "rest"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")]
    inits = [init("zero", np.array(0, np.int64)), init("axes0", np.array([0], np.int64)),
             init("minus_one_f", np.array([-1.0, 7.0], np.float32)),
             init("s0", np.array([0], np.int64)), init("s1", np.array([1], np.int64))]
    path = save(tmp_path, nodes, [tensor("x", ["batch", 8, 2, 2])], [tensor("y", None)], inits)
    for batch in (1, 3):
        log = []
        g = onnx_frontend.load_onnx(path, batch=batch, log=log)
        assert [n.op_type for n in g.nodes] == ["Reshape"]
        assert g.nodes[0].attrs == {"shape": (batch, 32)} and g.nodes[0].inputs == ["x"]
        assert g.outputs[0].shape == (batch, 32) and g.initializers == {}
        assert any("Shape x1" in line and "Concat x1" in line for line in log)


def test_kiln_shape_rules_fill_what_onnx_leaves_unknown(tmp_path):
    # A Reshape whose target comes from a Where over constants: onnx's data propagation gives up
    # on it, folding resolves it, and kiln's rules carry the shape through Transpose and Softmax.
    nodes = [helper.make_node("Equal", ["a", "b"], ["cond"], name="eq"),
             helper.make_node("Where", ["cond", "t1", "t2"], ["target"], name="where"),
             helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
             helper.make_node("Transpose", ["r"], ["t"], name="transpose", perm=[0, 2, 1]),
             helper.make_node("Softmax", ["t"], ["y"], name="softmax")]
    inits = [init("a", np.array([1, 2, 3], np.int64)), init("b", np.array([1, 0, 3], np.int64)),
             init("t1", np.array([0, 4, -1], np.int64)), init("t2", np.array([9, 2, 9], np.int64))]
    path = save(tmp_path, nodes, [tensor("x", [1, 4, 6])], [tensor("y", None)], inits)
    g = onnx_frontend.load_onnx(path)
    assert [n.op_type for n in g.nodes] == ["Reshape", "Transpose", "Softmax"]
    assert g.nodes[0].attrs["shape"] == (1, 2, 12)
    assert g.values["t"].shape == (1, 12, 2) and g.outputs[0].shape == (1, 12, 2)
    assert g.nodes[2].attrs == {"axis": 2}


def test_identity_removal_keeps_output_names(tmp_path):
    nodes = [helper.make_node("Identity", ["x"], ["x1"], name="id_in"),
             helper.make_node("Relu", ["x1"], ["r"], name="relu"),
             helper.make_node("Identity", ["r"], ["y"], name="id_out"),
             helper.make_node("Identity", ["x"], ["z"], name="id_passthrough")]
    path = save(tmp_path, nodes, [tensor("x", [2, 3])], [tensor("y", None), tensor("z", None)])
    g = onnx_frontend.load_onnx(path)
    relu = next(n for n in g.nodes if n.op_type == "Relu")
    assert relu.inputs == ["x"] and relu.outputs == ["y"]
    assert [v.name for v in g.outputs] == ["y", "z"] and g.outputs[0].shape == (2, 3)
    # a graph input copied straight to a graph output keeps its Identity: nothing else can carry the name
    assert [n.name for n in g.nodes if n.op_type == "Identity"] == ["id_passthrough"]


def test_dropout_is_removed(tmp_path):
    nodes = [helper.make_node("Dropout", ["x"], ["d"], name="drop"),
             helper.make_node("Relu", ["d"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [tensor("x", [2, 3])], [tensor("y", None)])
    g = onnx_frontend.load_onnx(path)
    assert [(n.op_type, n.inputs) for n in g.nodes] == [("Relu", ["x"])]


def test_constant_arithmetic_folds(tmp_path):
    # Sqrt(Constant 4) * w -> one initializer feeding the Add
    nodes = [helper.make_node("Constant", [], ["four"], name="c", value=numpy_helper.from_array(
                 np.full(3, 4.0, np.float32))),
             helper.make_node("Sqrt", ["four"], ["two"], name="sqrt"),
             helper.make_node("Mul", ["two", "w"], ["w2"], name="mul"),
             helper.make_node("Add", ["x", "w2"], ["y"], name="add")]
    path = save(tmp_path, nodes, [tensor("x", [2, 3])], [tensor("y", None)],
                [init("w", np.arange(3, dtype=np.float32))])
    g = onnx_frontend.load_onnx(path)
    assert [n.op_type for n in g.nodes] == ["Add"]
    np.testing.assert_array_equal(g.initializers[g.nodes[0].inputs[1]], [0, 2, 4])


def test_transformer_ops_normalise(tmp_path):
    # LayerNormalization -> MatMul -> Add -> Gelu -> ReduceMean (axes as an input, opset 20)
    d = 8
    nodes = [helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["ln"], name="ln"),
             helper.make_node("MatMul", ["ln", "w"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "b"], ["a"], name="add"),
             helper.make_node("Gelu", ["a"], ["ge"], name="gelu"),
             helper.make_node("ReduceMean", ["ge", "axes"], ["y"], name="mean", keepdims=0)]
    inits = [init("scale", np.ones(d, np.float32)), init("bias", np.zeros(d, np.float32)),
             init("w", np.ones((d, 2 * d), np.float32)), init("b", np.zeros(2 * d, np.float32)),
             init("axes", np.array([-1], np.int64))]
    path = save(tmp_path, nodes, [tensor("x", ["batch", 5, d])], [tensor("y", None)], inits, opset=20)
    g = onnx_frontend.load_onnx(path, batch=2)
    attrs = {n.op_type: n.attrs for n in g.nodes}
    assert attrs["LayerNormalization"] == {"axis": 2, "epsilon": 1e-5, "stash_type": 1}
    assert attrs["Gelu"] == {"approximate": "none"}
    assert attrs["ReduceMean"] == {"axes": (2,), "keepdims": 0}
    assert g.nodes[-1].inputs == ["ge"] and g.outputs[0].shape == (2, 5)
    assert g.values["mm"].shape == (2, 5, 2 * d)


def test_required_ops_are_in_the_table():
    required = {"Conv", "BatchNormalization", "Relu", "Clip", "Add", "Mul", "Div", "Sub", "Sqrt", "Pow", "Erf",
                "Gelu", "MaxPool", "AveragePool", "GlobalAveragePool", "Flatten", "Reshape", "Transpose", "Gemm",
                "MatMul", "Softmax", "LayerNormalization", "ReduceMean", "Concat", "Identity"} | BUILD_TIME_OPS
    assert required <= set(OPS)
    assert all(OPS[op].build_time_only for op in BUILD_TIME_OPS - RUNTIME_TOO)
    assert all(OPS[op].fold is not None and OPS[op].infer is not None for op in RUNTIME_TOO)
    assert all(e.build_time_only or e.infer is not None for e in OPS.values())


def bert_layer(tmp_path, opset, hidden=32, heads=4, seq=6):
    """One BERT encoder layer written the way the torch exporter writes it: Constant nodes, view() as
    Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Dropout, LayerNorm and GELU decomposed into
    elementwise ops (and the second LayerNorm as LayerNormalization)."""
    nodes, inits, hd = [], [], hidden // heads
    counter = iter(range(1000))

    def node(op, inputs, **attrs):
        k = next(counter)
        out = f"{op.lower()}_{k}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"/layer/{op}_{k}", **attrs))
        return out

    def const(value, dtype=np.float32):
        return node("Constant", [], value=numpy_helper.from_array(np.asarray(value, dtype)))

    def weight(name, shape):
        inits.append(init(name, (RNG.standard_normal(shape) * 0.2).astype(np.float32)))
        return name

    def linear(x, name, n_in, n_out):
        return node("Add", [weight(f"{name}.bias", (n_out,)),
                            node("MatMul", [x, weight(f"{name}.weight", (n_in, n_out))])])

    def view(x, tail):  # x.view(x.size(0), x.size(1), *tail)
        shape = node("Shape", [x])
        dims = [node("Unsqueeze", [node("Gather", [shape, const(i, np.int64)], axis=0), const([0], np.int64)])
                for i in (0, 1)]
        return node("Reshape", [x, node("Concat", dims + [const(list(tail), np.int64)], axis=0)])

    def reduce_mean(x):
        if opset >= 18:
            return node("ReduceMean", [x, const([-1], np.int64)])
        return node("ReduceMean", [x], axes=[-1])

    def decomposed_layernorm(x, name):
        d = node("Sub", [x, reduce_mean(x)])
        var = reduce_mean(node("Pow", [d, const(2.0)]))
        n = node("Div", [d, node("Sqrt", [node("Add", [var, const(1e-12)])])])
        return node("Add", [node("Mul", [n, weight(f"{name}.gamma", (hidden,))]), weight(f"{name}.beta", (hidden,))])

    x = "hidden_states"
    q, k, v = (node("Transpose", [view(linear(x, n, hidden, hidden), (heads, hd))], perm=p)
               for n, p in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])))
    scores = node("Div", [node("MatMul", [q, k]), const(math.sqrt(hd))])
    probs = node("Dropout", [node("Softmax", [scores], axis=-1)])
    context = view(node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]), (hidden,))
    h = decomposed_layernorm(node("Add", [linear(context, "attn_out", hidden, hidden), x]), "ln1")
    f = linear(h, "intermediate", hidden, 4 * hidden)
    gelu = node("Mul", [node("Mul", [f, node("Add", [node("Erf", [node("Div", [f, const(math.sqrt(2))])]),
                                                      const(1.0)])]), const(0.5)])
    out = node("Add", [linear(gelu, "output", 4 * hidden, hidden), h])
    nodes.append(helper.make_node("LayerNormalization", [out, weight("ln2.gamma", (hidden,)),
                                                         weight("ln2.beta", (hidden,))], ["y"], name="/layer/ln2",
                                  epsilon=1e-12))
    return save(tmp_path, nodes, [tensor(x, ["batch", seq, hidden])], [tensor("y", ["batch", seq, hidden])], inits,
                opset=opset)


@pytest.mark.parametrize("opset", [17, 18])
def test_bert_layer_as_exported_matches_onnxruntime(tmp_path, opset):
    path = bert_layer(tmp_path, opset)
    g = onnx_frontend.load_onnx(path, batch=2)
    ops = Counter(n.op_type for n in g.nodes)
    assert not (BUILD_TIME_OPS | {"Dropout"}) & set(ops)
    assert ops["Reshape"] == 4 and ops["MatMul"] == 8 and ops["LayerNormalization"] == 1
    assert {n.attrs["shape"] for n in g.nodes if n.op_type == "Reshape"} == {(2, 6, 4, 8), (2, 6, 32)}
    assert all(n.attrs == {"axes": (2,), "keepdims": 1} and len(n.inputs) == 1
               for n in g.nodes if n.op_type == "ReduceMean")
    x = RNG.standard_normal((2, 6, 32)).astype(np.float32)
    (expect,) = ort_run(path, {"hidden_states": x})
    (got,) = run_ir(g, {"hidden_states": x})
    np.testing.assert_allclose(got, expect, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- problems

def unsupported_model(tmp_path):
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["picked"], name="nms"),
             helper.make_node("Conv", ["x", "w"], ["c"], name="grouped_conv", group=3, pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c"], ["y"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                              storage_order=1)]
    inputs = [tensor("boxes", [1, 10, 4]), tensor("scores", [1, 1, 10]), tensor("x", ["batch", 32, 16, 16])]
    outputs = [helper.make_tensor_value_info("picked", TensorProto.INT64, None), tensor("y", None)]
    return save(tmp_path, nodes, inputs, outputs, [init("w", np.ones((32, 8, 3, 3), np.float32))])


def test_unsupported_nodes_are_all_listed(tmp_path):
    path = unsupported_model(tmp_path)
    with pytest.raises(KilnError) as e:
        onnx_frontend.load_onnx(path)
    msg = str(e.value)
    assert str(path) in msg and "3 node(s)" in msg
    assert "node 'nms' (NonMaxSuppression, opset 17): op type NonMaxSuppression is not supported" in msg
    assert "node 'grouped_conv' (Conv, opset 17): group=3 with 32 output channels: group must be a positive " \
           "integer dividing the output channels" in msg
    assert "node 'pool' (MaxPool, opset 17): storage_order=1 is not supported" in msg
    assert msg.rstrip().splitlines()[-1].startswith(
        "Supported ops: Abs, Add, ArgMax, ArgMin, AveragePool, BatchNormalization")

    problems = onnx_frontend.check_onnx(path)
    assert [(p["node"], p["op_type"]) for p in problems] == [
        ("nms", "NonMaxSuppression"), ("grouped_conv", "Conv"), ("pool", "MaxPool")]
    r = analyze.analyze(path)
    assert len(r["unsupported"]) == 3 and r["nodes"] == 3 and r["params_bytes"] == 32 * 8 * 9 * 4
    assert "NOT SUPPORTED: 3 problem(s)" in analyze.format_text(r)


def test_runtime_indices_come_from_a_graph_input(tmp_path):
    # Gather on a run-time tensor (an embedding lookup) is not build-time shape arithmetic: a graph input of indices
    # loads (the gather_mte kernel); indices computed in the model (here cast from a float input) are refused
    nodes = [helper.make_node("Gather", ["table", "ids"], ["y"], name="embed")]
    path = save(tmp_path, nodes, [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
                [tensor("y", None)], [init("table", np.ones((10, 3), np.float32))])
    assert onnx_frontend.load_onnx(path).values["y"].shape == (1, 4, 3)
    nodes = [helper.make_node("Cast", ["x"], ["ids"], name="cast", to=TensorProto.INT64),
             helper.make_node("Gather", ["table", "ids"], ["y"], name="embed")]
    path = save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None)],
                [init("table", np.ones((10, 3), np.float32))])
    with pytest.raises(KilnError, match=r"node 'embed' \(Gather, opset 17\): indices \(input 1\) are computed in "
                                        r"the model; kiln takes run-time indices from a graph input"):
        onnx_frontend.load_onnx(path)


def test_inconsistent_constant_reshape_names_the_node(tmp_path):
    # every input is constant, so fold_constants evaluates the Reshape; its rule rejects the target shape
    nodes = [helper.make_node("Reshape", ["c", "s"], ["r"], name="bad"), helper.make_node("Add", ["x", "x"], ["y"])]
    path = save(tmp_path, nodes, [tensor("x", [1, 6])], [tensor("y", [1, 6])],
                [init("c", np.zeros((2, 3), np.float32)), init("s", np.array([4, 2], np.int64))])
    with pytest.raises(KilnError, match=r"node 'bad' \(Reshape\): cannot evaluate it at build time: _Unsupported: "
                                        r"cannot reshape \(2, 3\) \(6 elements\) to \[4, 2\]"):
        onnx_frontend.load_onnx(path)


def test_dynamic_non_batch_dim_is_an_error(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [tensor("x", ["batch", "seq", 8])], [tensor("y", None)])
    with pytest.raises(KilnError, match=r"input 'x' dim 1 \('seq'\) is dynamic"):
        onnx_frontend.load_onnx(path)


@pytest.mark.parametrize("opset", [6, 22])
def test_opset_outside_range_is_rejected(tmp_path, opset):
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None)], opset=opset)
    with pytest.raises(KilnError, match=rf"opset {opset} is not supported: kiln accepts ONNX opsets 7\.\.21"):
        onnx_frontend.load_onnx(path)


def test_accepted_opset_bounds_load(tmp_path):
    for opset in (13, 21):
        nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
        path = save(tmp_path, nodes, [tensor("x", [1, 4])], [tensor("y", None)], opset=opset, name=f"m{opset}.onnx")
        assert onnx_frontend.load_onnx(path).outputs[0].shape == (1, 4)


def bad_files(tmp_path):
    files = {"random": RNG.bytes(4096), "empty": b"", "text": b"not a model\n"}
    if MOBILENET.is_file():
        with open(MOBILENET, "rb") as f:
            files["truncated"] = f.read(1000)
    paths = []
    for name, data in files.items():
        p = tmp_path / f"{name}.onnx"
        p.write_bytes(data)
        paths.append(p)
    return paths


def test_unreadable_files_name_the_file(tmp_path):
    for path in bad_files(tmp_path):
        for load in (onnx_frontend.load_onnx, onnx_frontend.check_onnx, analyze.analyze):
            with pytest.raises(KilnError) as e:
                load(path)
            assert str(path) in str(e.value) and "not a readable ONNX model" in str(e.value), (path, str(e.value))
            assert e.value.__context__ is None or e.value.__suppress_context__, "no protobuf traceback"


def test_missing_file(tmp_path):
    with pytest.raises(KilnError, match=r"missing\.onnx: no such file"):
        onnx_frontend.load_onnx(tmp_path / "missing.onnx")
