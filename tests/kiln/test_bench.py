"""`kiln bench`: the JSON contract, and clear refusals (model, batch, peers) rather than crashes."""
import json
import shutil

import pytest
from conftest import run

import kiln


def kiln_cmd():
    exe = shutil.which("kiln")
    if exe is None:
        pytest.fail("the kiln console script is not installed (pip install .)")
    return exe


def small_model() -> str:
    if not kiln.models():
        pytest.skip("no models baked (KILN_MODELS is empty)")
    return "bert_layer" if "bert_layer" in kiln.models() else kiln.models()[0]


def test_bench_json_has_the_schema_and_a_ratio_per_peer():
    pytest.importorskip("onnxruntime", reason="ONNX Runtime is the peer this test times")
    r = run([kiln_cmd(), "bench", small_model(), "--peers", "ort", "--repeat", "3", "--warmup", "1", "--json"])
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {"model", "batch", "threads", "dtype", "engines", "ratios"} <= set(d)
    assert {"peak_gflops", "date", "machine", "isa", "commit", "unavailable"} <= set(d)
    assert d["model"] == small_model() and d["batch"] >= 1 and d["threads"] >= 1
    assert [e["name"] for e in d["engines"]] == ["kiln", "ort"]
    assert d["dtype"] == d["engines"][0]["dtype"] == kiln.build_info()["dtype"]  # the build's KILN_DTYPE
    for e in d["engines"]:
        assert {"name", "median_ms", "min_ms", "max_ms", "gflops", "peak_rss_mb"} <= set(e)
        assert 0 < e["min_ms"] <= e["median_ms"] <= e["max_ms"]
        assert e["gflops"] > 0 and e["peak_rss_mb"] > 0 and e["runs"] == 3 * d["rounds"]
    assert set(d["ratios"]) == {"ort"}
    kiln_row, ort_row = d["engines"]
    assert d["ratios"]["ort"] == pytest.approx(kiln_row["median_ms"] / ort_row["median_ms"])
    assert kiln_row["simulated_ms"] > 0 and kiln_row["threads_used"] == d["threads"]
    assert d["peak_gflops"] > 0


def test_bench_unknown_model_names_it_and_the_baked_ones():
    small_model()
    r = run([kiln_cmd(), "bench", "no_such_model"])
    assert r.returncode != 0
    assert "no_such_model" in r.stderr and kiln.models()[0] in r.stderr


def test_bench_other_batch_than_baked_says_how_to_bake_it():
    name = small_model()
    rec = next(m for m in kiln.manifest()["models"] if m["name"] == name)
    batch = rec["inputs"][0]["shape"][0] + 6
    if f"{name}_b{batch}" in kiln.models():
        pytest.skip(f"{name}_b{batch} is baked")
    r = run([kiln_cmd(), "bench", name, "--batch", str(batch)])
    assert r.returncode != 0 and f"{name}@{batch}" in r.stderr and "baked at batch" in r.stderr


def test_bench_unknown_peer_is_rejected_with_the_accepted_list():
    r = run([kiln_cmd(), "bench", small_model(), "--peers", "ort,tensorflow"])
    assert r.returncode != 0
    assert "'tensorflow'" in r.stderr and "ort, openvino, torch" in r.stderr


def test_bench_peer_not_installed_is_reported_unavailable(monkeypatch):
    from kiln import bench
    monkeypatch.setitem(bench.PEER_MODULES, "openvino", "kiln_test_no_such_engine")
    # a given peak skips the GEMM measurement: this test is about the peers
    d = bench.run(small_model(), threads=1, peers=["openvino", "torch"], timing=bench.Timing(1, 0, 1),
                  peak={"gflops": 1.0})
    assert [e["name"] for e in d["engines"]] == ["kiln"] and d["ratios"] == {}
    reasons = {u["name"]: u["reason"] for u in d["unavailable"]}
    assert set(reasons) == {"openvino", "torch"}
    assert "kiln_test_no_such_engine" in reasons["openvino"]
    assert "openvino: unavailable" in bench.format_text(d)


def test_bench_profile_writes_per_step_host_times_and_simulated_cycles(tmp_path):
    if "bert_layer" not in kiln.models():
        pytest.skip("bert_layer not baked")
    out = tmp_path / "p.json"
    r = run([kiln_cmd(), "bench", "bert_layer", "--peers", "ort", "--repeat", "2", "--warmup", "1", "--rounds", "1",
             "--profile", out, "--json"])
    assert r.returncode == 0, r.stderr
    prof = json.loads(out.read_text())
    rec = next(m for m in kiln.manifest()["models"] if m["name"] == "bert_layer")
    assert prof["format"] == "kiln-profile/1" and prof["model"] == "bert_layer"
    assert [s["name"] for s in prof["steps"]] == [s["name"] for s in rec["steps"]]
    for s, st in zip(prof["steps"], rec["steps"]):
        assert s["kernel"] == st["kernel"] and s["cpu_ms"] >= 0
        assert (s["simulated_cycles"] is None) == (st["kind"] != "kernel")
        if s["simulated_cycles"] is not None:
            assert s["simulated_cycles"] > 0
    assert prof["simulated_cycles"] == pytest.approx(sum(s["simulated_cycles"] or 0 for s in prof["steps"]))
    assert prof["total_cpu_ms"] > 0
