"""The fusion stage on small models built here: kernel counts and log lines under
ENABLE_FUSION=OFF, MAX_FUSION_DEPTH=1 and the defaults (plans only, no build)."""
import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from conftest import REPO, minimal_kernel_list  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen.options import parse_options  # noqa: E402
from codegen.pipeline import plan  # noqa: E402

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
    nodes.append(helper.make_node("Conv", ["r1", w("dw.w", (16, 1, 3, 3))], ["dw"], name="dw", pads=[1, 1, 1, 1],
                                  group=16))
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
    options = {"KILN_MODELS": str(path), "KILN_KERNEL_LIST": str(minimal_kernel_list(tmp_path)),
               "DEBUG_OPTIMIZATION_PATH": "ON", **opts}
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
    # what no kernel does yet is audited: depthwise -> pointwise, and a conv -> 1x1 chain after a clip
    assert [(a["pattern"], a["into"], a["node"], a["reason"]) for a in m.fusion.audit] == [
        ("DwConv+Conv1x1", "dw", "pw", "chain_unsupported"), ("Conv+Conv1x1", "pw", "c2", "chain_unsupported")]


def test_fusion_writes_its_decisions_into_the_typed_record_not_the_onnx_attributes(tmp_path):
    m, _, _ = model_plan(tmp_path)
    onnx_attrs = {n.name: {a.name for a in n.attribute} for n in onnx.load(str(tmp_path / "small.onnx")).graph.node}
    nodes = {n.name: n for n in m.fusion.graph.nodes}
    for n in nodes.values():  # the frontend's normalised ONNX attributes only (pads, strides, ...), nothing fusion set
        fusion_keys = {"activation", "residual", "second", "siblings", "chain_first", "fused", "fused_types"}
        assert not set(n.attrs) & (fusion_keys | ({"min", "max"} if n.op_type != "Clip" else set())), n
        assert set(n.attrs) >= onnx_attrs.get(n.name, set()) - {"pads"}
    # conv+bn+relu and conv+clip6 keep their epilogues in Node.fused; the residual add went into c2 (then relu)
    assert nodes["c1"].fused.activation == "Relu" and nodes["c1"].fused.ops == ["relu1"]
    assert nodes["pw"].fused.activation == "Clip" and nodes["pw"].fused.clip == (0.0, 6.0)
    assert nodes["c2"].fused.residual == "r1" and nodes["c2"].fused.op_types == ["Add", "Relu"]


def test_fusion_off_gives_one_kernel_per_op(tmp_path):
    _m, launches, lines = model_plan(tmp_path, ENABLE_FUSION="OFF")
    assert launches == 9
    assert all("reason=fusion_off" in ln for ln in lines) and len(lines) == 5


def test_depth_one_rejects_with_the_limit(tmp_path):
    _m, launches, lines = model_plan(tmp_path, MAX_FUSION_DEPTH="1")
    assert launches == 9
    assert sum("reason=depth_limit" in ln for ln in lines) == 5 == len(lines)


@pytest.mark.parametrize("level,launches,fusion,winograd", [
    ("O0", 9, False, "OFF"), ("O1", 4, True, "OFF"), ("O2", 4, True, "AUTO"), ("O3", 4, True, "AUTO")])
def test_opt_levels_imply_their_options(tmp_path, level, launches, fusion, winograd):
    path = small_cnn(tmp_path / "small.onnx")
    p = plan(parse_options({"KILN_MODELS": str(path), "KILN_KERNEL_LIST": str(minimal_kernel_list(tmp_path)),
                            "KILN_OPT_LEVEL": level}), REPO, tmp_path)
    assert sum(1 for s in p.models[0].lowered.steps if s.kind == "kernel") == launches
    assert (p.options.enable_fusion, p.options.use_winograd) == (fusion, winograd)
    assert f"[OPT] options build USE_WINOGRAD={winograd} reason=opt_level KILN_OPT_LEVEL={level}" in p.log.lines


def test_an_explicit_option_overrides_the_level(tmp_path):
    o = parse_options({"KILN_OPT_LEVEL": "O0", "ENABLE_FUSION": "ON", "USE_WINOGRAD": "F2"})
    assert (o.enable_fusion, o.max_fusion_depth, o.use_winograd) == (True, 1, "F2")
    assert o.from_level == ("MAX_FUSION_DEPTH",)


def test_log_is_byte_identical_across_runs(tmp_path):
    a = model_plan(tmp_path / "a" if (tmp_path / "a").mkdir() is None else None)[2]
    b = model_plan(tmp_path / "b" if (tmp_path / "b").mkdir() is None else None)[2]
    assert [re.sub(r"/tmp\S*", "", x) for x in a] == [re.sub(r"/tmp\S*", "", x) for x in b]


def plan_graph(tmp_path, nodes, inputs, outputs, inits, **opts):
    g = helper.make_graph(nodes, "g", inputs, outputs, inits)
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    p = plan(parse_options({"KILN_MODELS": str(path), "KILN_KERNEL_LIST": str(minimal_kernel_list(tmp_path)),
                            **opts}), REPO, tmp_path)
    return p.models[0], [ln for ln in p.log.lines if ln.startswith("[OPT] fusion")]


def t(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def wts(name, shape):
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.2).astype(np.float32), name)


def test_one_activation_and_one_residual_per_kernel(tmp_path):
    six = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("zero", 0.0), ("six", 6.0))]
    # 3x3 convolutions: none of them can be accumulated into another as a second source
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], name="ca", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w1"], ["b"], name="cb", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["c"], name="cc", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "a"], ["s1"], name="add1"),
             helper.make_node("Add", ["s1", "b"], ["s2"], name="add2"),  # c already takes a residual
             helper.make_node("Clip", ["s2", "zero", "six"], ["r6"], name="clip"),
             helper.make_node("Relu", ["r6"], ["y"], name="relu")]
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 6, 6])], [t("y", [1, 16, 6, 6])],
                          [wts("w0", (16, 16, 3, 3)), wts("w1", (16, 16, 3, 3)), wts("w2", (16, 16, 3, 3))] + six)
    assert any("add1 Fused(Conv+Add)" in ln for ln in lines)
    assert not any("add2 Fused" in ln for ln in lines)  # no second residual on cc
    kernels = [s for s in m.lowered.steps if s.kind == "kernel"]
    assert sum(1 for s in kernels if s.instance.attrs.get("residual")) == 1


def test_a_1x1_downsample_is_accumulated_into_the_other_convs_l0c(tmp_path):
    """ResNet's downsample block: conv3(mid) + downsample(x, stride 2), then ReLU -> one kernel, ReLU in Fixpipe."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["mid"], name="conv1", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Conv", ["mid", "w3"], ["c3"], name="conv3"),
             helper.make_node("Conv", ["x", "wd"], ["d"], name="down", strides=[2, 2]),
             helper.make_node("Add", ["c3", "d"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"], name="relu")]
    inits = [wts("w1", (16, 16, 3, 3)), wts("w3", (32, 16, 1, 1)), wts("wd", (32, 16, 1, 1))]
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 8, 8])], [t("y", [1, 32, 4, 4])], inits)
    assert any("add Fused(Conv+Conv+Add) reason=second_source_l0c into=down second=conv3" in ln for ln in lines), lines
    assert any("relu Fused(Conv+Conv+Add+Relu) reason=epilogue_fixpipe" in ln for ln in lines), lines
    kernels = [s for s in m.lowered.steps if s.kind == "kernel"]
    assert len(kernels) == 2
    assert kernels[1].instance.attrs["second"] == (16, 4, 4, 1)  # conv3's input: 16 channels, 4x4, stride 1
    # conv1 and the downsample both read x: audited as siblings, the downsample being in the two-source kernel
    assert [(a["pattern"], a["into"], a["node"], a["reason"]) for a in m.fusion.audit] == [
        ("Conv+Conv", "conv1", "down", "sibling_taken")]
    assert any("conv1 Conv+Conv:rejected reason=sibling_taken siblings=conv1,down input=x" in ln for ln in lines)
    # at depth 3 the ReLU no longer fits, and the log says so
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 8, 8])], [t("y", [1, 32, 4, 4])], inits,
                          MAX_FUSION_DEPTH="3")
    assert any("relu Conv+Relu:rejected reason=depth_limit" in ln for ln in lines), lines
    # fusion off: four kernels and an eltwise add, as the graph says
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 8, 8])], [t("y", [1, 32, 4, 4])], inits,
                          ENABLE_FUSION="OFF")
    assert any("add Conv+Conv+Add:rejected reason=fusion_off" in ln for ln in lines), lines


def test_residual_operand_computed_later_is_rejected_not_crashing(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c"], name="conv"),
             helper.make_node("Relu", ["x"], ["rx"], name="relu_x"),     # listed after the conv
             helper.make_node("Add", ["c", "rx"], ["y"], name="add")]
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 6, 6])], [t("y", [1, 16, 6, 6])],
                          [wts("w0", (16, 16, 1, 1))])
    assert any("add Conv+Add:rejected reason=operand_order" in ln for ln in lines), lines
    assert sum(1 for s in m.lowered.steps if s.kind == "kernel") == 3


def test_stacked_activations_keep_the_second_as_its_own_kernel(tmp_path):
    six = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("zero", 0.0), ("six", 6.0))]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c"], name="conv"),
             helper.make_node("Clip", ["c", "zero", "six"], ["c6"], name="clip"),
             helper.make_node("Relu", ["c6"], ["y"], name="relu")]
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 6, 6])], [t("y", [1, 16, 6, 6])],
                          [wts("w0", (16, 16, 1, 1))] + six)
    assert any("relu Conv+Relu:rejected reason=activation_taken" in ln for ln in lines), lines
    types = [s.instance.type for s in m.lowered.steps if s.kind == "kernel"]
    assert types == ["Conv", "Relu"]


def test_a_conv_read_only_by_a_1x1_conv_chains_through_l1(tmp_path):
    """conv3x3+ReLU -> conv1x1: one kernel when the map gives every Cube core a 16-pixel tile; a small map or
    a second reader of the intermediate keeps two kernels, and the log says why."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="conv_a", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"], name="relu_a"),
             helper.make_node("Conv", ["ar", "w2"], ["y"], name="conv_b")]
    inits = [wts("w1", (16, 16, 3, 3)), wts("w2", (32, 16, 1, 1))]
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 20, 20])], [t("y", [1, 32, 20, 20])], inits)
    assert any("conv_b Fused(Conv+Relu+Conv) reason=chain_l1 into=conv_b first=conv_a" in ln for ln in lines), lines
    (k,) = [s for s in m.lowered.steps if s.kind == "kernel"]
    assert k.instance.attrs["mid"] == (16, False, True) and k.ops == ["conv_a", "relu_a", "conv_b"]
    # 8x8: 4 tiles of 16 pixels for 24 Cube cores
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 8, 8])], [t("y", [1, 32, 8, 8])], inits)
    assert any("conv_b Conv+Conv1x1:rejected reason=chain_idle_cores" in ln for ln in lines), lines
    assert sum(1 for s in m.lowered.steps if s.kind == "kernel") == 2
    # the intermediate is a graph output too: it must reach GM
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 20, 20])],
                          [t("y", [1, 32, 20, 20]), t("ar", [1, 16, 20, 20])], inits)
    assert sum(1 for s in m.lowered.steps if s.kind == "kernel") == 2
    # depth 2: the chain (conv, ReLU, conv = 3 ops) is refused
    m, lines = plan_graph(tmp_path, nodes, [t("x", [1, 16, 20, 20])], [t("y", [1, 32, 20, 20])], inits,
                          MAX_FUSION_DEPTH="2")
    assert any("conv_b Conv+Conv1x1:rejected reason=depth_limit" in ln for ln in lines), lines


def torchvision_style_resnet50(path):
    """ResNet-50 as torch.onnx.export writes it from torchvision in eval mode: every BatchNormalization already
    folded into its Conv (weights scaled, a bias added), Identity nodes on the way, a Flatten+Gemm head. Built
    from the zoo's graph (same weights) so no download is needed."""
    from codegen.frontend import zoo
    m = zoo.build("resnet50")
    g = m.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    nodes, renamed = [], {}
    for n in g.node:
        ins = [renamed.get(i, i) for i in n.input]
        if n.op_type == "BatchNormalization":
            conv = producer[n.input[0]]
            eps = next(a.f for a in n.attribute if a.name == "epsilon")
            gamma, beta, mean, var = (inits[i] for i in n.input[1:])
            scale = gamma / np.sqrt(var + eps)
            w = inits[conv.input[1]] * scale[:, None, None, None]
            b = beta - mean * scale
            inits[conv.input[1]] = w.astype(np.float32)
            inits[conv.name + ".bias"] = b.astype(np.float32)
            folded = next(x for x in nodes if x.name == conv.name)
            folded.input.append(conv.name + ".bias")
            renamed[n.output[0]] = folded.output[0]
            continue
        node = helper.make_node(n.op_type, ins, list(n.output), name=n.name)
        node.attribute.extend(n.attribute)
        nodes.append(node)
        if n.op_type == "Relu" and n.name.endswith("relu3"):  # the exporter's Identity between blocks
            ident = n.output[0] + ".identity"
            nodes.append(helper.make_node("Identity", [n.output[0]], [ident], name=n.name + ".Identity"))
            renamed[n.output[0]] = ident
    used = {i for n in nodes for i in n.input}
    graph = helper.make_graph(nodes, "torch_jit", list(g.input), list(g.output),
                              [numpy_helper.from_array(v, k) for k, v in inits.items() if k in used])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_torchvision_style_resnet50_export_fits_47_launches(tmp_path, search_cache):
    path = torchvision_style_resnet50(tmp_path / "resnet50_tv.onnx")
    p = plan(parse_options({"KILN_MODELS": str(path), "KILN_KERNEL_LIST": str(minimal_kernel_list(tmp_path)),
                            "KILN_OPT_LEVEL": "O1"}), REPO, tmp_path,  # O1: no Winograd search (faster plan)
             jobs=2, search_cache_dir=search_cache)
    (m,) = p.models
    kernels = [s for s in m.lowered.steps if s.kind == "kernel"]
    assert len(kernels) <= 47, len(kernels)
    assert not any("BatchNormalization" in s.ops for s in kernels)
    fused = [ln for ln in p.log.lines if ln.startswith("[OPT] fusion") and "Fused(" in ln]
    assert sum("reason=second_source_l0c" in ln for ln in fused) == 4  # the four downsample blocks
    assert sum("reason=chain_l1" in ln for ln in fused) == 5


def qkv_graph(width=32, value_width=32):
    """Three projections of one input (MatMul + bias Add, as exporters write them), each read by its own op."""
    nodes, inits = [], []
    for name, n in (("q", width), ("k", width), ("v", value_width)):
        inits += [wts(f"{name}.w", (48, n)), wts(f"{name}.b", (n,))]
        nodes.append(helper.make_node("MatMul", ["x", f"{name}.w"], [f"{name}.mm"], name=f"{name}.MatMul"))
        nodes.append(helper.make_node("Add", [f"{name}.mm", f"{name}.b"], [name], name=f"{name}.Add"))
    nodes.append(helper.make_node("Mul", ["v", "v"], ["v_out"], name="v.Square"))
    nodes.append(helper.make_node("Add", ["q", "k"], ["qk"], name="qk.Add"))
    return nodes, [t("x", [1, 24, 48])], [t("qk", [1, 24, width]), t("v_out", [1, 24, value_width])], inits


def test_sibling_gemms_of_one_input_become_one_gemm(tmp_path):
    m, lines = plan_graph(tmp_path, *qkv_graph())
    kernels = [s for s in m.lowered.steps if s.kind == "kernel"]
    gemms = [s for s in kernels if s.instance.type == "Gemm"]
    assert len(gemms) == 1 and gemms[0].instance.attrs["split"] == 32 and gemms[0].instance.attrs["b"] == (48, 96)
    assert sorted(gemms[0].ops) == sorted(["q.MatMul", "q.Add", "k.MatMul", "k.Add", "v.MatMul", "v.Add"])
    assert len(kernels) == 3  # the GEMM, q + k, v * v
    assert any("g:q.MatMul Fused(MatMul+MatMul+MatMul) reason=siblings_one_gemm" in ln
               and "siblings=q.MatMul,k.MatMul,v.MatMul" in ln for ln in lines), lines
    # each result is a view of its slice of the one output
    low = m.lowered
    out = gemms[0].output
    assert [low.aliases.get(v) for v in ("q", "k", "v")] == [out] * 3
    assert [low.alias_offsets.get(v, 0) for v in ("q", "k", "v")] == [0, 24 * 32 * 2, 2 * 24 * 32 * 2]


@pytest.mark.parametrize("opts,reason", [({"ENABLE_FUSION": "OFF"}, "fusion_off"),
                                         ({"MAX_FUSION_DEPTH": "2"}, "depth_limit")])
def test_sibling_gemms_stay_apart_when_fusion_is_off_or_too_deep(tmp_path, opts, reason):
    m, lines = plan_graph(tmp_path, *qkv_graph(), **opts)
    assert sum(1 for s in m.lowered.steps if s.kind == "kernel" and s.instance.type == "Gemm") == 3
    assert any("Fused(MatMul+MatMul+MatMul)" not in ln and "MatMul+MatMul+MatMul:rejected" in ln
               and f"reason={reason}" in ln for ln in lines), lines
    assert any(a["pattern"] == "MatMul+MatMul+MatMul" and a["reason"] == reason for a in m.fusion.audit)


def test_sibling_gemms_take_the_builds_cube_dtype(tmp_path):
    m, _ = plan_graph(tmp_path, *qkv_graph(), KILN_DTYPE="bf16")
    (gemm,) = [s for s in m.lowered.steps if s.kind == "kernel" and s.instance.type == "Gemm"]
    assert gemm.instance.attrs["dtype"] == "bf16" and m.lowered.weights[gemm.inputs[1]].dtype == np.uint16


def test_sibling_gemms_of_different_widths_are_audited(tmp_path):
    m, _lines = plan_graph(tmp_path, *qkv_graph(value_width=40))
    assert sum(1 for s in m.lowered.steps if s.kind == "kernel" and s.instance.type == "Gemm") == 3
    (a,) = [a for a in m.fusion.audit if a["pattern"] == "MatMul+MatMul+MatMul"]
    assert a["reason"] == "sibling_shapes" and "32/40" in a["detail"]


# ---------------------------------------------------------------- flash attention

def tiny_attention(tmp_path, seq=24, hf_style=False, scale_op="Div", mask=False, softmax_axis=-1, d=32, heads=2):
    """One self-attention of 2 heads of 16 over seq tokens, as exporters write it: Q/K/V projections, Reshape to
    heads, Transpose; K^T as one Transpose (0,2,3,1) (the zoo's bert_layer) or, hf_style, the heads-split K
    Transpose (0,2,1,3) then (0,1,3,2); the scale as Div by sqrt(d) or Mul by 1/sqrt(d); optionally an additive
    mask; Softmax; .V; heads merged back."""
    hd = d // heads
    inits = [wts(f"{p}.w", (d, d)) for p in "qkv"]
    inits.append(numpy_helper.from_array(np.array([1, seq, heads, hd], np.int64), "heads_shape"))
    inits.append(numpy_helper.from_array(np.array([1, seq, d], np.int64), "merged_shape"))
    inits.append(numpy_helper.from_array(np.array(np.sqrt(hd) if scale_op == "Div" else 1 / np.sqrt(hd), np.float32),
                                         "scale"))
    nodes = []
    for p in "qkv":
        nodes.append(helper.make_node("MatMul", ["x", f"{p}.w"], [f"{p}.proj"], name=f"{p}.MatMul"))
        nodes.append(helper.make_node("Reshape", [f"{p}.proj", "heads_shape"], [f"{p}.split"], name=f"{p}.Reshape"))
        perm = [0, 2, 3, 1] if p == "k" and not hf_style else [0, 2, 1, 3]
        nodes.append(helper.make_node("Transpose", [f"{p}.split"], [f"{p}.heads"], name=f"{p}.Transpose", perm=perm))
    kt = "k.heads"
    if hf_style:
        nodes.append(helper.make_node("Transpose", ["k.heads"], ["k.t"], name="k.Transpose_1", perm=[0, 1, 3, 2]))
        kt = "k.t"
    nodes.append(helper.make_node("MatMul", ["q.heads", kt], ["scores"], name="scores.MatMul"))
    nodes.append(helper.make_node(scale_op, ["scores", "scale"], ["scaled"], name="scores.Scale"))
    logits = "scaled"
    if mask:
        shape = mask if isinstance(mask, list) else (1, 1, 1, seq)
        inits.append(numpy_helper.from_array(np.zeros(shape, np.float32), "mask"))
        nodes.append(helper.make_node("Add", ["scaled", "mask"], ["masked"], name="scores.Mask"))
        logits = "masked"
    nodes.append(helper.make_node("Softmax", [logits], ["probs"], name="Softmax", axis=softmax_axis))
    nodes.append(helper.make_node("MatMul", ["probs", "v.heads"], ["ctx"], name="context.MatMul"))
    nodes.append(helper.make_node("Transpose", ["ctx"], ["ctx.t"], name="context.Transpose", perm=[0, 2, 1, 3]))
    nodes.append(helper.make_node("Reshape", ["ctx.t", "merged_shape"], ["y"], name="context.Reshape"))
    return nodes, [t("x", [1, seq, d])], [t("y", [1, seq, d])], inits


def attention_plan(tmp_path, graph_opts=None, **opts):
    tmp_path.mkdir(parents=True, exist_ok=True)
    m, lines = plan_graph(tmp_path, *tiny_attention(tmp_path, **(graph_opts or {})), DEBUG_OPTIMIZATION_PATH="ON",
                          **opts)
    kinds = [s.instance.type for s in m.lowered.steps if s.kind == "kernel"]
    return m, kinds, [ln for ln in lines if "Attention" in ln or "Softmax" in ln]


# the Q, K, V projections are sibling GEMMs of x: one GEMM (test_sibling_gemms_*), then the three head splits
PROJECTIONS = ["Gemm"] + ["Transpose0213"] * 3
UNFUSED = PROJECTIONS + ["BatchedMatMul", "Muls", "Softmax", "BatchedMatMul", "Transpose0213"]


def test_attention_becomes_one_flash_kernel_by_default(tmp_path):
    m, kinds, lines = attention_plan(tmp_path)
    assert kinds == PROJECTIONS + ["Attention", "Transpose0213"]
    (line,) = lines
    assert re.fullmatch(r"\[OPT\] fusion g:context\.MatMul Fused\(MatMul\+Div\+Softmax\+MatMul\) "
                        r"reason=flash_attention into=context\.MatMul where=\S+ ops=4 seq_q=24 seq_kv=24 heads=2 "
                        r"head_dim=16 scale=0\.25 score_matrix_bytes=2304", line), line
    (step,) = [s for s in m.lowered.steps if s.kind == "kernel" and s.instance.type == "Attention"]
    assert step.ops == ["scores.MatMul", "scores.Scale", "Softmax", "context.MatMul"]
    assert m.fusion.audit == []


@pytest.mark.parametrize("graph_opts", [dict(hf_style=True, scale_op="Mul", softmax_axis=3), dict(scale_op="Mul")])
def test_attention_pattern_matches_other_export_forms(tmp_path, graph_opts):
    """A Mul by 1/sqrt(d), Softmax axis 3, and K^T as a Transpose (0,1,3,2) of the heads-split K (absorbed)."""
    _m, kinds, lines = attention_plan(tmp_path, graph_opts)
    assert kinds.count("Attention") == 1 and "Softmax" not in kinds and "BatchedMatMul" not in kinds, kinds
    assert "reason=flash_attention" in lines[0] and "scale=0.25" in lines[0]
    if graph_opts.get("hf_style"):  # the K^T transpose is part of the kernel: K is read as [b, h, kv, d]
        assert "Fused(Transpose+MatMul+Mul+Softmax+MatMul)" in lines[0]
        assert kinds.count("Transpose0213") == 4


def test_flash_attention_off_keeps_the_unfused_kernels_and_audits(tmp_path):
    m, kinds, lines = attention_plan(tmp_path, USE_FLASH_ATTENTION="OFF")
    assert kinds == UNFUSED
    assert [(a["pattern"], a["node"], a["reason"]) for a in m.fusion.audit] == [
        ("Attention", "context.MatMul", "option_off")]
    (line,) = lines
    assert line.startswith("[OPT] fusion g:context.MatMul Attention:rejected reason=option_off "
                           "detail=USE_FLASH_ATTENTION=OFF ops=MatMul+Div+Softmax+MatMul seq_q=24 seq_kv=24")


def test_sequence_above_max_seq_len_is_rejected_with_the_numbers(tmp_path):
    m, kinds, lines = attention_plan(tmp_path, MAX_SEQ_LEN="16")
    assert kinds == UNFUSED
    assert [(a["node"], a["reason"], a["detail"]) for a in m.fusion.audit] == [
        ("context.MatMul", "seq_exceeds_max_seq_len", "seq_kv 24 > MAX_SEQ_LEN=16")]
    assert "Attention:rejected reason=seq_exceeds_max_seq_len detail=seq_kv_24_>_MAX_SEQ_LEN=16" in lines[0]


def test_attention_under_fusion_off_depth_limit_and_a_mask(tmp_path):
    assert attention_plan(tmp_path / "off", ENABLE_FUSION="OFF")[0].fusion.audit[0]["reason"] == "fusion_off"
    m, kinds, _ = attention_plan(tmp_path / "depth", MAX_FUSION_DEPTH="3")
    assert kinds == UNFUSED and m.fusion.audit[0]["detail"] == "depth 4 > MAX_FUSION_DEPTH=3"
    # masks (the fusion stage alone: unfused, no kernel takes a broadcast add yet)
    from codegen.families.registry import attention_capacity
    from codegen.frontend import onnx_import as onnx_frontend
    from codegen.ir import optlog, profiles
    from codegen.passes import fusion

    def audit(name, **graph):
        nodes, ins, outs, inits = tiny_attention(tmp_path, **graph)
        onnx.save(helper.make_model(helper.make_graph(nodes, "g", ins, outs, inits),
                                    opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / f"{name}.onnx"))
        g = onnx_frontend.load_onnx(tmp_path / f"{name}.onnx")
        res = fusion.fuse(g, "g", fusion.FusionLimits(True, 5, profile=profiles.PROFILES["ascend910b"],
                                                      attention_capacity=attention_capacity), optlog.OptLog())
        return [(a["reason"], a["detail"]) for a in res.audit if a["pattern"] == "Attention"]

    assert audit("mask", mask=True) == []  # a [batch, 1, 1, kv] mask is fused (the kernel adds it per key)
    assert audit("mask_rows", mask=[1, 1, 24, 24]) == [
        ("attention_unsupported", "scores.Mask adds a mask of shape [1, 1, 24, 24]; the kernel takes one per batch "
                                  "and key, [1, 1, 1, 24]")]
    # a head too wide for the smallest tile: Q's 16 rows and P's 16x16 fractal overflow L0A
    assert audit("wide", d=2048, heads=1, seq=16) == [
        ("capacity", "head dim 2048: the smallest tile needs 66048 B of L0A, ascend910b has 65536 B")]


def test_a_padding_mask_is_fused_and_its_unfused_form_named(tmp_path):
    m, kinds, lines = attention_plan(tmp_path / "on", dict(mask=True))
    assert kinds == PROJECTIONS + ["Attention", "Transpose0213"]
    assert "Fused(MatMul+Div+Add+Softmax+MatMul) reason=flash_attention" in lines[0]
    (step,) = [s for s in m.lowered.steps if s.kind == "kernel" and s.instance.type == "Attention"]
    assert step.instance.attrs["mask"] and m.lowered.weights[step.inputs[3]].shape == (1, 24)
    # unfused, the scale and the mask's broadcast add (a [1, 1, 1, kv] row over the scores) are one elementwise
    # program where the Muls was
    _, kinds, _ = attention_plan(tmp_path / "off", dict(mask=True), USE_FLASH_ATTENTION="OFF")
    assert kinds == [k if k != "Muls" else "EltwiseProgram" for k in UNFUSED]


def standalone_bn_relu(path, shape, act="Relu"):
    """BatchNormalization of the graph input (no Conv to fold it into: DenseNet's BN after a Concat), then `act`."""
    c = shape[1]
    inits = [numpy_helper.from_array(np.full(c, v, np.float32), f"bn.{p}")
             for p, v in zip("gbmv", (1.5, 0.1, 0.2, 2.0))]
    nodes = [helper.make_node("BatchNormalization", ["x"] + [f"bn.{p}" for p in "gbmv"], ["b"], name="bn")]
    if act == "Clip":
        inits += [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("lo", -1.0), ("hi", 1.0))]
        nodes.append(helper.make_node("Clip", ["b", "lo", "hi"], ["y"], name="act"))
    else:
        nodes.append(helper.make_node(act, ["b"], ["y"], name="act"))
    g = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("shape, kernel", [([1, 24, 5, 5], "Conv"), ([2, 32], "Conv"), ([2, 37], "Gemm")])
def test_a_standalone_batchnorm_takes_the_relu_after_it(tmp_path, shape, kernel):
    """The per-channel affine runs on the depthwise Vector kernel (4-D, or 2-D of whole C0 blocks), which applies
    ReLU in the same pass; other 2-D inputs are a GEMM, whose Fixpipe applies it: one launch either way."""
    path = standalone_bn_relu(tmp_path / "bn.onnx", shape)
    p = plan(parse_options({"KILN_MODELS": str(path), "KILN_KERNEL_LIST": str(minimal_kernel_list(tmp_path)),
                            "DEBUG_OPTIMIZATION_PATH": "ON"}), REPO, tmp_path)
    steps = [s for s in p.models[0].lowered.steps if s.kind == "kernel"]
    assert [(s.kernel_op.type, s.kernel_op.attrs["activation"], s.ops) for s in steps] == \
        [(kernel, "Relu", ["bn", "act"])]
    assert any(re.search(r"fusion \S+:act Fused\(BatchNormalization\+Relu\) reason=epilogue_(vector|fixpipe)", line)
               for line in p.log.lines)


@pytest.mark.parametrize("act, options, reason", [("Clip", {}, "epilogue_unsupported"),
                                                  ("Relu", {"ENABLE_FUSION": "OFF"}, "fusion_off"),
                                                  ("Relu", {"MAX_FUSION_DEPTH": "1"}, "depth_limit")])
def test_a_standalone_batchnorm_keeps_a_tail_it_cannot_take(tmp_path, act, options, reason):
    path = standalone_bn_relu(tmp_path / "bn.onnx", [1, 24, 5, 5], act)
    p = plan(parse_options({"KILN_MODELS": str(path), "KILN_KERNEL_LIST": str(minimal_kernel_list(tmp_path)),
                            "DEBUG_OPTIMIZATION_PATH": "ON", **options}), REPO, tmp_path)
    assert sum(1 for s in p.models[0].lowered.steps if s.kind == "kernel") == 2
    assert any(f"BatchNormalization+{act}:rejected reason={reason}" in line for line in p.log.lines)
