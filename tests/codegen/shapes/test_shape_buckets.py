"""KILN_SHAPE_BUCKETS and the generic kernels (codegen/shapes/buckets.py, codegen/shapes/generic.py, kiln/dispatch.py).

A tiny image model (strided and SAME-padded convs, a standalone residual add, a fused one, maxpool,
depthwise + ReLU6, global average pool and a GEMM head; own input 224x224) is planned here for the codegen
checks, and baked once with KILN_SHAPE_BUCKETS="224;256" for the end-to-end ones: 224 and 256 run their
specialised kernels, 240 and 233x256 the generic ones, all against ONNX Runtime on the same file.
"""
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from conftest import REPO, build_package, minimal_kernel_list  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from codegen import KilnError, pipeline  # noqa: E402
from codegen.emit.render import manifest, model_log, weights_blob  # noqa: E402
from codegen.frontend.onnx_import import load_onnx  # noqa: E402
from codegen.ir import layouts  # noqa: E402
from codegen.options import parse_options  # noqa: E402
from codegen.pipeline import plan  # noqa: E402
from codegen.shapes import buckets as sbk  # noqa: E402
from codegen.shapes.generic import RUNTIME_FIELDS  # noqa: E402

MIN_SIZE = 17  # c1 and the pool halve the size (ceil), c4 (SAME) halves it again, c5 (3x3, stride 2, no pad) needs 3


def tiny_image_model(path: Path, size: int = 224, tail=None) -> Path:
    """conv(s2)+BN+ReLU -> maxpool -> conv+ReLU -> add+ReLU (standalone: the conv already ends with its ReLU) ->
    conv + residual add + ReLU (fused) -> conv(s2, SAME_UPPER)+ReLU -> depthwise+ReLU6 -> conv(s2, no pad)+ReLU ->
    conv 1x1+ReLU (one chained kernel with the previous conv where the map has a 16-pixel tile per Cube core:
    from about 400x400 on ascend910b) -> global average pool -> flatten -> GEMM. `tail(nodes, inits, x)` may
    replace the head (returns the output)."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def w(name, shape, scale=None):
        fan_in = int(np.prod(shape[1:]))
        arr = rng.standard_normal(shape) * (scale or np.sqrt(2.0 / fan_in))
        inits.append(numpy_helper.from_array(arr.astype(np.float32), name))
        return name

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v, np.float32), name))
        return name

    def bn(x, name, c):
        for p, v in (("g", 1 + 0.1 * rng.standard_normal(c)), ("b", 0.1 * rng.standard_normal(c)),
                     ("m", 0.1 * rng.standard_normal(c)), ("v", 1 + 0.1 * rng.random(c))):
            inits.append(numpy_helper.from_array(np.asarray(v, np.float32), f"{name}.{p}"))
        nodes.append(helper.make_node("BatchNormalization", [x] + [f"{name}.{p}" for p in "gbmv"], [name], name=name))
        return name

    node = helper.make_node
    nodes.append(node("Conv", ["x", w("c1.w", (16, 3, 3, 3))], ["c1"], name="c1", strides=[2, 2], pads=[1, 1, 1, 1]))
    nodes.append(node("Relu", [bn("c1", "bn1", 16)], ["r1"], name="relu1"))
    nodes.append(node("MaxPool", ["r1"], ["m"], name="pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    nodes.append(node("Conv", ["m", w("c2.w", (16, 16, 3, 3)), const("c2.b", rng.standard_normal(16) * 0.1)], ["c2"],
                      name="c2", pads=[1, 1, 1, 1]))
    nodes.append(node("Relu", ["c2"], ["r2"], name="relu2"))
    nodes.append(node("Add", ["r2", "m"], ["s1"], name="add1"))
    nodes.append(node("Relu", ["s1"], ["a1"], name="relu_a1"))
    nodes.append(node("Conv", ["a1", w("c3.w", (16, 16, 3, 3), 0.05)], ["c3"], name="c3", pads=[1, 1, 1, 1]))
    nodes.append(node("Add", ["c3", "a1"], ["s2"], name="add2"))
    nodes.append(node("Relu", ["s2"], ["a2"], name="relu_a2"))
    nodes.append(node("Conv", ["a2", w("c4.w", (32, 16, 3, 3))], ["c4"], name="c4", strides=[2, 2],
                      auto_pad="SAME_UPPER"))
    nodes.append(node("Relu", ["c4"], ["r4"], name="relu4"))
    nodes.append(node("Conv", ["r4", w("dw.w", (32, 1, 3, 3), 0.3)], ["dw"], name="dw", pads=[1, 1, 1, 1], group=32))
    nodes.append(node("Clip", ["dw", const("zero", 0.0), const("six", 6.0)], ["d6"], name="dw_relu6"))
    nodes.append(node("Conv", ["d6", w("c5.w", (32, 32, 3, 3))], ["c5"], name="c5", strides=[2, 2]))
    nodes.append(node("Relu", ["c5"], ["r5"], name="relu5"))
    nodes.append(node("Conv", ["r5", w("c6.w", (32, 32, 1, 1))], ["c6"], name="c6"))  # chains with c5 on large maps
    nodes.append(node("Relu", ["c6"], ["r6"], name="relu6"))
    if tail is None:
        nodes.append(node("GlobalAveragePool", ["r6"], ["gap"], name="gap"))
        nodes.append(node("Flatten", ["gap"], ["flat"], name="flatten"))
        nodes.append(node("Gemm", ["flat", w("fc.w", (10, 32)), const("fc.b", rng.standard_normal(10) * 0.1)], ["y"],
                          name="fc", transB=1))
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    else:
        out = tail(nodes, inits, "r6")
    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, size, size])
    g = helper.make_graph(nodes, "tiny_image", [inp], [out], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def kernel_list(root: Path) -> Path:
    return minimal_kernel_list(root)


def bucket_plan(root: Path, model: Path, buckets: str = "224;256", **opts):
    options = {"KILN_MODELS": str(model), "KILN_KERNEL_LIST": str(kernel_list(root)), "KILN_SHAPE_BUCKETS": buckets,
               "DEBUG_OPTIMIZATION_PATH": "ON", **opts}
    return plan(parse_options(options), REPO, root)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_image_model(tmp_path_factory.mktemp("tiny") / "tiny.onnx")


# ---------------------------------------------------------------- codegen (no build)

def test_runtime_fields_match_the_cpp_struct():
    header = (REPO / "kernels" / "kiln" / "generic_abi.hpp").read_text()
    body = header.split("#define KILN_RUNTIME_SHAPE_FIELDS(X)", 1)[1].split("\n\n", 1)[0]
    assert tuple(re.findall(r"X\((\w+)\)", body)) == RUNTIME_FIELDS


@pytest.mark.parametrize("size", [(240, 240), (233, 256), (MIN_SIZE, 61)])
def test_graph_at_size_matches_onnx_shape_inference(tiny, tmp_path, size):
    """Every value's shape at another size, SAME pads re-resolved, equals ONNX's own shape inference."""
    graph = load_onnx(tiny)
    g = sbk.graph_at_size(graph, size, "tiny", sbk.same_padding(tiny))
    model = onnx.load(str(tiny))
    for d, v in zip(model.graph.input[0].type.tensor_type.shape.dim[2:], size):
        d.dim_value = v
    model.graph.output[0].type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(model)
    want = {vi.name: tuple(d.dim_value for d in vi.type.tensor_type.shape.dim)
            for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    for node in g.nodes:  # BatchNormalization was folded: its conv writes the BN's output
        assert g.values[node.outputs[0]].shape == want[node.outputs[0]], node.name
    c4 = next(n for n in g.nodes if n.name == "c4")
    h4, w4 = g.values[c4.inputs[0]].shape[2:]
    assert c4.attrs["pads"] == (h4 % 2, w4 % 2, 1, 1)  # SAME_UPPER, k3 s2: the extra row/column at the end


def test_a_size_below_the_receptive_field_names_the_node(tiny):
    graph = load_onnx(tiny)
    with pytest.raises(KilnError,
                       match=r"node 'c5' \(Conv\) of tiny at input size 16x16.*larger than the padded input"):
        sbk.graph_at_size(graph, (16, 16), "tiny", sbk.same_padding(tiny))
    assert sbk.min_input_size(graph, "tiny", sbk.same_padding(tiny)) == (MIN_SIZE, MIN_SIZE)


def test_bucket_plans_kernels_and_log(tiny, tmp_path):
    p = bucket_plan(tmp_path, tiny)
    (m,) = p.models  # the bucket plan lives under its model, not beside it
    assert m.shapes.sizes == (224, 256) and [b.name for b in m.shapes.buckets] == ["tiny_s256"]
    launches = len(m.step_kernels)
    bucket = m.shapes.buckets[0]
    assert len(bucket.step_kernels) == launches
    shared = {k.symbol for k in m.step_kernels.values()} & {k.symbol for k in bucket.step_kernels.values()}
    assert shared == {"gemm_cube_m1_k32_n10_bias"}  # the head does not depend on the size: one kernel for both
    # one generic kernel per step but the GEMM, four for the SAME-padded stride-2 conv (its pads follow the parity),
    # and one for c5 and c6 chained (the build's fusion does not chain them at 224 or 256; larger maps do)
    names = [g.symbol for g in p.generic_kernels]
    assert len(names) == len(m.shapes.generic_symbols) == (launches - 1) + 3 + 1
    assert sum("o32_k3x3_s2_p" in n and "1x16xHxW" in n for n in names) == 4
    assert not any(n.startswith("gemm") for n in names)
    lines = [ln for ln in p.log.lines if ln.startswith("[OPT] shapes")]
    assert f"[OPT] shapes tiny buckets=224x256 reason=shape_buckets input=x own=224x224 bucket_plans=1 " \
           f"min_size={MIN_SIZE}x{MIN_SIZE}" in lines
    assert any(ln.startswith("[OPT] shapes tiny_s256 baked reason=shape_bucket size=256x256") for ln in lines)
    assert any(ln.startswith("[OPT] shapes tiny generic reason=generic_path generic_kernels=14") for ln in lines)
    assert sum("reason=generic_kernel" in ln for ln in lines) == len(names)
    log = model_log(p, m)  # `kiln log tiny`: the bucket's own decisions are in the model's log
    assert "[OPT] tiling conv2d_1x3x256x256_o16_k3x3_c04_s2_p1_bias_relu conv2d_cube_img2col_" in log
    assert "tiny_s256:" in log and "conv2d_cube_img2col_generic_1x3xHxW_o16_k3x3_c04_s2_p1_bias_relu" in log
    rec = manifest(p)["models"][0]
    assert [b["input_size"] for b in rec["shape_buckets"]["plans"]] == [[256, 256]]
    assert rec["shape_buckets"]["min_size"] == [MIN_SIZE, MIN_SIZE]
    json.dumps(rec, allow_nan=False)  # strict JSON (the visualize report embeds records)


def test_a_bucket_too_small_for_the_model_stops_the_build(tiny, tmp_path):
    with pytest.raises(KilnError, match=r"node 'c5' \(Conv\) of tiny at input size 16x16"):
        bucket_plan(tmp_path, tiny, buckets="16;224")


def test_winograd_buckets_and_the_generic_path_share_one_blob(tiny, tmp_path):
    """Forced F(2,3): bucket kernels read transformed weights, the generic path's direct convolutions read the
    FRACTAL_Z originals; one blob holds both, under names the steps reference."""
    p = bucket_plan(tmp_path, tiny, USE_WINOGRAD="F2")
    (m,) = p.models
    blob, index = weights_blob(m)
    assert "c2.w" in index and "c2.w@winograd_f2" in index and "c3.w@winograd_f2" in index
    got = np.frombuffer(blob, np.float16, index["c2.w@winograd_f2"][1] // 2, index["c2.w@winograd_f2"][0])
    want = layouts.fractal_z_to_winograd(m.lowered.weights["c2.w"], 16, 16, 2)
    assert np.array_equal(got, want.reshape(-1))
    rec = manifest(p)["models"][0]
    for r in [rec] + rec["shape_buckets"]["plans"]:
        c2 = next(s for s in r["steps"] if s["name"] == "c2")
        assert c2["kernel"].startswith("conv2d_winograd_f2") and c2["inputs"][1][1] == index["c2.w@winograd_f2"][0]
    kernels = manifest(p)["kernels"]
    sized = pipeline.plan_size(rec, kernels, p.options.as_dict(), (240, 240), set(m.shapes.generic_symbols))
    c2 = next(s for s in sized.record["steps"] if s["name"] == "c2")
    assert "generic" in c2["kernel"] and c2["inputs"][1][1] == index["c2.w"][0]


def test_generic_tiling_takes_the_fastest_of_the_rule_and_the_searched_tilings(tiny, tmp_path):
    p = bucket_plan(tmp_path, tiny)
    (m,) = p.models
    man = manifest(p)
    names = set(m.shapes.generic_symbols)
    for size, borrowed_from in (((224, 224), "conv2d_cube_img2col_1x3x224x224"), ((240, 240), None)):
        sized = pipeline.plan_size(man["models"][0], man["kernels"], p.options.as_dict(), size, names,
                                   prefer_baked=False)
        lines = [ln for ln in sized.log.lines if ln.startswith("[OPT] shapes conv2d_") and "reason=cost_model" in ln]
        assert len(lines) == 6, lines  # one per generic convolution
        for ln in lines:
            fields = dict(kv.split("=", 1) for kv in ln.split()[5:])
            assert int(fields["best_cycles"]) <= int(fields["rule_cycles"]) and int(fields["candidates"]) >= 2, ln
        if borrowed_from:  # at a bucket size its own searched tiling wins (the search never loses to the rule)
            assert any(f"source={borrowed_from}" in ln for ln in lines), lines


def test_without_buckets_nothing_changes(tiny, tmp_path):
    p = bucket_plan(tmp_path, tiny, buckets="")
    assert p.models[0].shapes is None and not p.generic_kernels
    assert "shape_buckets" not in manifest(p)["models"][0]
    assert not any("reason=shape" in ln for ln in p.log.lines)


def test_a_model_that_is_not_an_image_model_is_skipped(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])
    w = numpy_helper.from_array(np.ones((32, 16), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mlp", [x], [y], [w])
    path = tmp_path / "mlp.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    p = bucket_plan(tmp_path, path)
    assert "[OPT] shapes mlp skipped reason=not_image_model inputs=x:4x32" in p.log.lines
    assert p.models[0].shapes is None and not p.generic_kernels


def test_a_size_dependent_kernel_without_generic_form_leaves_no_generic_path(tmp_path):
    """A softmax over the spatial axis depends on the size and has no generic mode: buckets still bake, other
    sizes are refused with the reason."""
    def softmax_head(nodes, inits, x):
        nodes.append(helper.make_node("Softmax", [x], ["y"], name="spatial_softmax", axis=-1))
        return helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    path = tiny_image_model(tmp_path / "soft.onnx", tail=softmax_head)
    p = bucket_plan(tmp_path, path, buckets="224;256")
    sb = p.models[0].shapes
    assert "spatial_softmax" in sb.generic_unavailable and "softmax_vector" in sb.generic_unavailable
    assert any("generic:unavailable reason=no_generic_form node=spatial_softmax" in ln for ln in p.log.lines)
    rec = manifest(p)["models"][0]
    with pytest.raises(KilnError, match=r"no generic path.*spatial_softmax"):
        pipeline.plan_size(rec, manifest(p)["kernels"], p.options.as_dict(), (240, 240), set())


def test_a_reshape_fixed_for_the_own_size_leaves_no_generic_path(tmp_path):
    def flatten_head(nodes, inits, x):  # a classifier over the flattened map: weights fix the size
        inits.append(numpy_helper.from_array(np.array([1, -1], np.int64), "shape"))
        inits.append(numpy_helper.from_array(np.ones((32 * 13 * 13, 10), np.float32) * 1e-3, "fcw"))
        nodes.append(helper.make_node("Reshape", [x, "shape"], ["flat"], name="flatten"))
        nodes.append(helper.make_node("MatMul", ["flat", "fcw"], ["y"], name="fc"))
        return helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])
    path = tiny_image_model(tmp_path / "flat.onnx", tail=flatten_head)
    p = bucket_plan(tmp_path, path, buckets="224")
    sb = p.models[0].shapes
    assert "node 'flatten' (Reshape)" in sb.generic_unavailable and "fixed at build time" in sb.generic_unavailable
    with pytest.raises(KilnError, match="node 'flatten' \\(Reshape\\) of flat at input size 256x256"):
        bucket_plan(tmp_path, path, buckets="224;256")


# ---------------------------------------------------------------- end to end (one scratch build)

CHECK = textwrap.dedent("""
    import json, os, sys, threading
    import numpy as np
    import kiln
    from kiln import _core
    from kiln.codegen.families.registry import predict
    from kiln.codegen.ir.profiles import get_profile
    from kiln.codegen.pipeline import plan_size
    from kiln.validate import validate
    out = {}
    m = kiln.load("tiny")

    # whether a generic launch runs the bucket kernel's own tiling, not another baked size's (the generic plan takes
    # whichever the cost model predicts fastest: codegen/shapes/buckets.py generic_tiling)
    def own_tiling(baked, runtime):
        fields = ("base_m", "base_n", "base_k1", "c1_step", "k1_step", "base_n2", "base_k2", "n_split")
        return not runtime or (all(runtime.get(f) == baked.get(f) for f in fields if f in runtime)
                               and runtime.get("l1_buffers", 2) == baked.get("l1_buffers", 2))
    for size in [(224, 224), (256, 256), (240, 240), (233, 256)]:
        r = validate(m, seeds=(0, 1), input_size=size)
        out[f"{size[0]}x{size[1]}"] = {"passed": r["passed"], "cosine": r["outputs"][0]["cosine"],
                                       "dispatch": m.last_dispatch}
    m.run(np.zeros((1, 3, 240, 240), np.float32))
    out["240_again"] = m.last_dispatch
    # a map large enough for the build's fusion to chain c5 and c6: the chained generic kernel
    r = validate(m, seeds=(0,), input_size=(416, 416))
    out["416x416"] = {"passed": r["passed"], "cosine": r["outputs"][0]["cosine"], "dispatch": m.last_dispatch,
                      "ops": [s["ops"] for s in m.plan_record["steps"] if s["kind"] == "kernel"],
                      "kernels": [k.kernel for k in m.kernels]}
    # the generic kernels at a bucket size against the bucket's: every kernel output bit for bit
    x = np.random.default_rng(3).standard_normal((1, 3, 224, 224)).astype(np.float32)
    _, bucket = m.run_capture(x)
    bucket_cycles = [k.simulated_cycles for k in m.kernels]
    bucket_kernels = [k.kernel for k in m.kernels]
    tilings = {k["name"]: k["tiling"] for k in kiln.manifest()["kernels"]}
    prefetch = [bool(tilings.get(k.kernel, {}).get("prefetch") or tilings.get(k.kernel, {}).get("resident"))
                for k in m.kernels]  # structural choices the generic kernel of the rule's form does not make
    _, forced = m.run_capture(x, force_generic=True)
    out["forced"] = {"dispatch": m.last_dispatch, "generic": [k.generic for k in m.kernels],
                     "equal": {n: bool(np.array_equal(bucket[n], forced[n])) for n in bucket},
                     "cycles": [[a, k.simulated_cycles] for a, k in zip(bucket_cycles, m.kernels)],
                     "prefetch": prefetch,
                     "own_tiling": [own_tiling(tilings.get(kb, {}), s.get("runtime_shape"))
                                    for kb, s in zip(bucket_kernels, [s for s in m.plan_record["steps"]
                                                                      if s["kind"] == "kernel"])]}
    # every generic launch's simulated cycles and pipe counts against the cost model's replay of it
    man = kiln.manifest()
    m.run(np.random.default_rng(4).standard_normal((1, 3, 240, 236)).astype(np.float32))
    sized = plan_size(m.record, man["kernels"], man["options"], (240, 236), set(_core.generic_kernel_names()))
    kernel_steps = [i for i, s in enumerate(sized.record["steps"]) if s["kind"] == "kernel"]
    rows = []
    for ks, i in zip(m.kernels, kernel_steps):
        if i in sized.kernels:
            spec, v = sized.kernels[i]
            rows.append({"kernel": ks.kernel, "generic": ks.generic, "simulated": ks.simulated_cycles,
                         "predicted": predict(spec, v.family, v.params, get_profile(man["profile"]),
                                              l2=tuple(sized.record["steps"][i]["l2_hits"])).cycles})
    out["cost_model"] = rows
    errors = {}
    for name, shape in [("small", (1, 3, 16, 16)), ("channels", (1, 4, 240, 240)), ("rank", (1, 3, 240)),
                        ("batch", (2, 3, 240, 240))]:
        try:
            m.run(np.zeros(shape, np.float32))
            errors[name] = None
        except ValueError as e:
            errors[name] = str(e)
    out["errors"] = errors
    # threads at different sizes at once: each gets its own plan's result
    xs = {s: np.random.default_rng(s).standard_normal((1, 3, s, s)).astype(np.float32) for s in (224, 240, 248, 256)}
    want = {s: kiln.load("tiny").run(x).copy() for s, x in xs.items()}
    got = {}
    threads = [threading.Thread(target=lambda s=s: got.__setitem__(s, m.run(xs[s]).copy())) for s in xs]
    [t.start() for t in threads]
    [t.join() for t in threads]
    out["threads_agree"] = all(np.array_equal(got[s], want[s]) for s in xs)
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def bucketed(tmp_path_factory):
    root = tmp_path_factory.mktemp("buckets")
    model = tiny_image_model(root / "tiny.onnx")
    pkg = build_package(root, f"KILN_MODELS={model}", f"KILN_KERNEL_LIST={kernel_list(root)}",
                        "KILN_SHAPE_BUCKETS=224;256")
    env = dict(os.environ, PYTHONPATH=str(pkg), KILN_LOG="1")
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    return {"pkg": pkg, "root": root, "out": json.loads(r.stdout.strip().splitlines()[-1]), "stderr": r.stderr}


def test_bucket_sizes_run_their_specialised_kernels(bucketed):
    for size in ("224x224", "256x256"):
        res = bucketed["out"][size]
        d = res["dispatch"]
        assert res["passed"] and res["cosine"] >= 0.999, res
        assert d["path"] == "bucket" and d["generic_kernels"] == 0 and d["kernels"] == d["baked_kernels"] == 11, d


def test_other_sizes_run_generic_kernels_and_match_onnxruntime(bucketed):
    for size, hw in (("240x240", [240, 240]), ("233x256", [233, 256])):
        res = bucketed["out"][size]
        d = res["dispatch"]
        assert res["passed"] and res["cosine"] >= 0.999, res
        assert d["path"] == "generic" and list(d["input_size"]) == hw, d
        assert d["generic_kernels"] == 10 and d["baked_kernels"] == 1, d  # the GEMM head is the baked kernel
    again = bucketed["out"]["240_again"]
    assert again["path"] == "generic" and not again["planned_now"]  # planned at first use, then cached


def test_a_size_where_fusion_chains_runs_the_chained_generic_kernel(bucketed):
    res = bucketed["out"]["416x416"]
    assert res["passed"] and res["cosine"] >= 0.999, res
    chained = [k for ops, k in zip(res["ops"], res["kernels"]) if "c5" in ops and "c6" in ops]
    assert len(chained) == 1 and "generic" in chained[0], res
    assert res["dispatch"]["kernels"] == 10  # one launch fewer than at 224


def test_generic_kernels_equal_the_bucket_kernels_bit_for_bit(bucketed):
    """Same templates, same emulator: at a bucket size the generic kernels (runtime shapes; the cost model picks
    the bucket's own searched tiling or another baked size's, whichever it predicts fastest) give every
    intermediate tensor bit for bit. Those running the bucket's own tiling take the same cycles, but where the
    bucket's kernel prefetches across its blocks or keeps a chain's weights in L1 (structural choices the generic
    kernel of the rule's form does not make): there the generic one is slower by the waits or loads they drop."""
    f = bucketed["out"]["forced"]
    assert f["dispatch"]["path"] == "generic" and f["generic"] == [True] * 10 + [False]
    assert f["equal"] and all(f["equal"].values()), f["equal"]
    assert sum(f["own_tiling"]) >= 9, f  # (the residual conv may borrow the 256 bucket's tiling at 224)
    assert all(a == b if not pf else a < b for (a, b), pf, own in zip(f["cycles"], f["prefetch"], f["own_tiling"])
               if own), f


def test_generic_kernels_report_simulated_cycles_the_cost_model_predicts(bucketed):
    rows = bucketed["out"]["cost_model"]
    assert len(rows) == 10 and all(r["generic"] for r in rows)
    for r in rows:
        assert r["simulated"] > 0 and r["predicted"] == pytest.approx(r["simulated"], rel=1e-9), r


def test_bad_inputs_name_the_input_the_shape_and_what_is_accepted(bucketed):
    e = bucketed["out"]["errors"]
    accepted = f"(1, 3, H, W) with H >= {MIN_SIZE} and W >= {MIN_SIZE} (baked sizes 224x224, 256x256; other sizes " \
               f"run on generic kernels)"
    assert "input 'x' of shape (1, 3, 16, 16) cannot run: node 'c5' (Conv) of tiny at input size 16x16" in e["small"]
    assert e["small"].endswith(f"; accepted: {accepted}"), e["small"]
    for key, shape in (("channels", "(1, 4, 240, 240)"), ("rank", "(1, 3, 240)"), ("batch", "(2, 3, 240, 240)")):
        assert e[key] == f"model tiny: input 'x' must have shape {accepted}, got {shape}", e[key]


def test_kiln_log_prints_one_line_per_dispatch(bucketed):
    lines = [ln for ln in bucketed["stderr"].splitlines() if ln.startswith("[kiln] dispatch tiny")]
    assert any("input=1x3x240x240 path=generic kernels=11 generic=10 baked=1" in ln and "planned_ms=" in ln
               for ln in lines)
    assert any("input=1x3x256x256 path=bucket kernels=11 generic=0 baked=11" in ln for ln in lines)
    assert len(lines) >= 12


def test_concurrent_calls_at_different_sizes(bucketed):
    assert bucketed["out"]["threads_agree"]


def test_validate_cli_takes_an_input_size(bucketed):
    env = dict(os.environ, PYTHONPATH=str(bucketed["pkg"]))
    r = subprocess.run([sys.executable, "-m", "kiln.cli", "validate", "tiny", "--input-size", "248x240", "--seeds", "1",
                        "--json"], capture_output=True, text=True, env=env, cwd=bucketed["root"])
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["passed"] and rep["dispatch"]["path"] == "generic" and rep["dispatch"]["input_size"] == [248, 240]
    r = subprocess.run([sys.executable, "-m", "kiln.cli", "validate", "tiny", "--input-size", "8"],
                       capture_output=True, text=True, env=env, cwd=bucketed["root"])
    assert r.returncode == 2 and "input 'x' of shape (1, 3, 8, 8) cannot run" in r.stderr, r.stderr
