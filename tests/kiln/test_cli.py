"""The `kiln` console script."""
import json
import shutil
import sys

import pytest
from conftest import run

import kiln


def kiln_cmd():
    exe = shutil.which("kiln")
    if exe is None:
        pytest.fail("the kiln console script is not installed (pip install .)")
    return exe


def test_kernels_json_lists_every_kernel_with_spec_and_variant():
    r = run([kiln_cmd(), "kernels", "--json"])
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["profile"] == kiln.build_info()["profile"]
    names = [k["name"] for k in data["kernels"]]
    assert names == [k.name for k in kiln.kernels()]
    for k in data["kernels"]:
        assert k["spec"] and k["tiling"] and k["variant"].startswith(k["family"])
        assert k["instances"] and k["features"]["bytes"] > 0 and k["features"]["flops"] >= 0


def test_kernels_table_and_info():
    r = run([kiln_cmd(), "kernels"])
    assert r.returncode == 0 and f"{len(kiln.kernels())} kernels for" in r.stdout
    r = run([kiln_cmd(), "info"])
    assert r.returncode == 0
    assert json.loads(r.stdout)["isa"] in ("amx_bf16", "avx512_bf16", "avx512", "avx2", "portable")


def test_log_without_debug_build_says_how_to_get_one():
    if kiln.build_info()["options"]["DEBUG_OPTIMIZATION_PATH"]:
        pytest.skip("this build has the log")
    r = run([kiln_cmd(), "log"])
    assert r.returncode == 1 and "DEBUG_OPTIMIZATION_PATH=ON" in r.stderr


def test_model_kernels_json_contract():
    if not kiln.models():
        pytest.skip("no models baked")
    name = kiln.models()[0]
    r = run([kiln_cmd(), "kernels", name, "--json"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    for key in ("model", "kernel_launches", "unique_kernels", "arena_bytes", "kernels", "simulated_latency_ms",
                "mean_cube_utilization"):
        assert key in d
    assert d["kernel_launches"] == len(d["kernels"]) and d["unique_kernels"] <= d["kernel_launches"]
    for k in d["kernels"]:
        assert {"name", "ops", "op_types", "algorithm", "opspec", "tiling", "simulated_cycles", "predicted_cycles",
                "bound_unit", "compared_cycles", "cube_utilization"} <= set(k)
        assert 0.0 <= k["cube_utilization"] <= 1.0
        assert k["simulated_cycles"] > 0
        if k["predicted_cycles"] is not None:  # families the cost model replays: prediction == simulation
            assert k["predicted_cycles"] == pytest.approx(k["simulated_cycles"], abs=1e-3)
        if k["compared_cycles"]:  # a 3x3 stride-1 conv: the algorithm with the fewest cycles was kept
            assert k["algorithm"] == min(k["compared_cycles"], key=lambda a: (k["compared_cycles"][a], a))


def test_resnet50_3x3_convolutions_compare_direct_and_both_winograd_tiles():
    import kiln
    if "resnet50" not in kiln.models() or kiln.manifest()["options"]["USE_WINOGRAD"] != "AUTO":
        pytest.skip("needs the default build")
    r = run([kiln_cmd(), "kernels", "resnet50", "--json"])
    compared = [k["compared_cycles"] for k in json.loads(r.stdout)["kernels"] if k["compared_cycles"]]
    assert len(compared) >= 4  # one 3x3 stride-1 conv per stage at least
    assert all(set(c) == {"direct_img2col", "winograd_f2", "winograd_f4"} for c in compared), compared


def test_analyze_reports_model_and_unsupported(tmp_path):
    onnx = pytest.importorskip("onnx")
    from codegen.frontend import zoo
    path = tmp_path / "bert.onnx"
    zoo.write("bert_layer", path)
    r = run([kiln_cmd(), "analyze", str(path), "--json"])
    d = json.loads(r.stdout)
    assert r.returncode == 0 and d["nodes"] == 33 and d["flops"] > 1e9 and d["unsupported"] == []
    assert 0 < d["would_bake"]["unique_kernels"] <= d["would_bake"]["kernel_launches"] <= d["ir_nodes"]
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)  # no kernel, no static shape: not even AI CPU
    m = helper.make_model(helper.make_graph([helper.make_node("NonZero", ["x"], ["y"], name="pick")], "g",
                                            [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    bad = tmp_path / "nonzero.onnx"
    onnx.save(m, str(bad))
    r = run([kiln_cmd(), "analyze", str(bad), "--json"])
    d = json.loads(r.stdout)
    assert r.returncode == 1 and d["unsupported"][0]["node"] == "pick" and d["unsupported"][0]["op_type"] == "NonZero"
    shared = tmp_path.parent / "missing.onnx"
    r = run([kiln_cmd(), "analyze", str(shared)])
    assert r.returncode == 2 and "missing.onnx" in r.stderr and "not a zoo model" in r.stderr


def test_analyze_shows_ops_before_kernels_after_and_the_fusion_audit(tmp_path):
    pytest.importorskip("onnx")
    from test_fusion import small_cnn
    path = small_cnn(tmp_path / "small.onnx")
    d = json.loads(run([kiln_cmd(), "analyze", str(path), "--json"]).stdout)
    fu = d["fusion"]
    assert fu["enable"] and fu["launches_unfused"] > fu["launches_fused"] == d["would_bake"]["kernel_launches"]
    assert fu["fused"] and all({"node", "into", "pattern", "where"} <= set(f) for f in fu["fused"])
    assert all({"node", "pattern", "reason", "detail"} <= set(a) for a in fu["audit"])
    off = json.loads(run([kiln_cmd(), "analyze", str(path), "--json", "--fusion", "off"]).stdout)["fusion"]
    assert off["launches_fused"] == off["launches_unfused"] == fu["launches_unfused"] and not off["fused"]
    assert off["audit"] and {a["reason"] for a in off["audit"]} == {"fusion_off"}
    text = run([kiln_cmd(), "analyze", str(path), "--max-fusion-depth", "1"]).stdout
    assert "MAX_FUSION_DEPTH=1" in text and "depth_limit" in text and "audit" in text


def test_analyze_takes_the_flash_attention_options(tmp_path):
    pytest.importorskip("onnx")
    import onnx
    from onnx import helper
    from test_fusion import tiny_attention
    nodes, ins, outs, inits = tiny_attention(tmp_path)
    path = tmp_path / "attn.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "attn", ins, outs, inits),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))
    on = json.loads(run([kiln_cmd(), "analyze", str(path), "--json"]).stdout)["fusion"]
    # attention: 4 kernels -> 1; the sibling Q, K, V projections: 3 GEMMs -> 1
    assert on["launches_unfused"] - on["launches_fused"] == 3 + 2
    assert [f["pattern"] for f in on["fused"]] == ["Attention", "MatMul+MatMul+MatMul"]
    for flags, reason in ((["--flash-attention", "off"], "option_off"),
                          (["--max-seq-len", "8"], "seq_exceeds_max_seq_len")):
        off = json.loads(run([kiln_cmd(), "analyze", str(path), "--json", *flags]).stdout)["fusion"]
        assert off["launches_fused"] == on["launches_unfused"] - 2
        assert [(a["pattern"], a["reason"]) for a in off["audit"]] == [("Attention", reason)]


def test_log_per_model_and_grep():
    if not kiln.build_info()["options"]["DEBUG_OPTIMIZATION_PATH"] or not kiln.models():
        pytest.skip("this build has no log or no model")
    name = kiln.models()[0]
    r = run([kiln_cmd(), "log", name, "--grep", r"^\[OPT\] (fusion|memory) "])  # the stages, not the option names
    assert r.returncode == 0 and r.stdout
    for line in r.stdout.splitlines():
        assert line.startswith("[OPT] ") and (f" {name}:" in line or f" {name} " in line) and "reason=" in line


def test_thread_counts_beyond_the_machine_are_refused_not_crashed():
    import kiln
    with pytest.raises(ValueError, match=r"1\.\."):
        kiln.set_num_threads(10 ** 6)
    r = run([sys.executable, "-c", "import kiln; print(kiln.build_info()['threads'])"],
            env={**__import__("os").environ, "KILN_NUM_THREADS": "abc"})
    assert r.returncode == 0 and "ignoring KILN_NUM_THREADS='abc'" in r.stderr


def test_trace_of_a_core_the_kernel_does_not_use_is_an_error():
    import kiln
    if not kiln.models():
        pytest.skip("no models baked")
    model = kiln.models()[0]
    rec = next(m for m in kiln.manifest()["models"] if m["name"] == model)
    kernel = next(s["kernel"] for s in rec["steps"] if s["kernel"])
    r = run([kiln_cmd(), "trace", model, "--kernel", kernel, "--core", "9999"])
    assert r.returncode == 2 and "--core 9999" in r.stderr and "virtual cores 0.." in r.stderr


def test_analyze_predict_on_both_profiles(tmp_path):
    """--predict adds the plan's predicted launches (tests/codegen/test_analyze_prediction.py holds them equal to
    a build's); the text report gives its total and each launch."""
    pytest.importorskip("onnx")
    import onnx
    from onnx import helper
    from test_fusion import tiny_attention
    nodes, ins, outs, inits = tiny_attention(tmp_path)
    path = tmp_path / "attn.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "attn", ins, outs, inits),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))
    for target in ("ascend910b", "ascend310p"):
        r = run([kiln_cmd(), "analyze", str(path), "--predict", "--json", "--target", target])
        assert r.returncode == 0, r.stderr
        pr = json.loads(r.stdout)["prediction"]
        assert pr["profile"] == target and pr["kernel_launches"] == len(pr["kernels"]) >= 1
        assert pr["cycles"] == pytest.approx(sum(k["predicted_cycles"] for k in pr["kernels"]), abs=1e-2)
        assert all(k["bound"] and k["hbm_bytes"] > 0 for k in pr["kernels"])
    text = run([kiln_cmd(), "analyze", str(path), "--predict"]).stdout
    assert "predicted " in text and "cycles" in text
