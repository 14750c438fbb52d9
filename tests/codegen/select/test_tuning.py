"""Tuning records: a build given KILN_TUNING_RECORDS uses them instead of searching, reproducibly, and
`kiln tune` measures candidates on the emulator to write them."""
import json
import shutil

import pytest
from conftest import REPO, minimal_kernel_list, run

from codegen import KilnError
from codegen.cost.model import COST_MODEL_VERSION
from codegen.emit.opspec_file import spec_hash
from codegen.emit.render import render
from codegen.options import parse_options
from codegen.pipeline import plan

KERNELS = """
[[op]]
label = "t.conv"
type = "Conv"
input = [1, 32, 28, 28]
weight = [64, 32, 3, 3]
pads = [1, 1, 1, 1]
bias = true
activation = "Relu"

[[op]]
label = "t.gemm"
type = "Gemm"
a = [64, 256]
b = [256, 128]
bias = true
"""


def planned(tmp_path, records=None):
    kl = tmp_path / "k.toml"
    kl.write_text(KERNELS)
    raw = {"KILN_MODELS": "", "KILN_KERNEL_LIST": str(kl), "DEBUG_OPTIMIZATION_PATH": "ON"}
    if records:
        raw["KILN_TUNING_RECORDS"] = str(records)
    return plan(parse_options(raw), REPO)


def write(tmp_path, recs, profile="ascend910b"):
    path = tmp_path / "records.json"
    path.write_text(json.dumps({"format": "kiln-tuning/1", "profile": profile, "cost_model": COST_MODEL_VERSION,
                                "records": recs}))
    return path


def conv_record(p, params=None):
    k = next(k for k in p.kernels if k.spec.kind == "conv2d")
    return k, {"opspec": spec_hash(k.spec), "family": "conv2d_cube_img2col", "simulated_cycles": 1.0,
               "params": params or {"base_m": 32, "base_n": 32, "base_k1": 2, "c1_step": 1}}


def test_a_record_replaces_the_search_and_is_logged(tmp_path):
    base = planned(tmp_path)
    _k, rec = conv_record(base)
    p = planned(tmp_path, write(tmp_path, [rec]))
    conv = next(x for x in p.kernels if x.spec.kind == "conv2d")
    assert {key: conv.variant.params[key] for key in rec["params"]} == rec["params"]
    assert any(f"search {conv.spec.name} " in ln and "reason=tuning_record" in ln for ln in p.log.lines)
    gemm = next(x for x in p.kernels if x.spec.kind == "gemm")  # no record: searched as before
    assert any(f"search {gemm.spec.name} " in ln and "reason=cost_model" in ln for ln in p.log.lines)


def test_builds_with_records_generate_identical_sources(tmp_path):
    _, rec = conv_record(planned(tmp_path))
    path = write(tmp_path, [rec])
    a, b = render(planned(tmp_path, path)), render(planned(tmp_path, path))
    assert a == b


@pytest.mark.parametrize("change,message", [
    (lambda recs: {"profile": "ascend310p"}, "measured for 'ascend310p'"),
    (lambda recs: {"records": [dict(recs[0], params={"base_m": 256, "base_n": 256, "base_k1": 8, "c1_step": 2})]},
     "needs"),
    (lambda recs: {"records": [dict(recs[0], params={"base_m": 24, "base_n": 32, "base_k1": 2, "c1_step": 1})]},
     "not a multiple of 16"),
    (lambda recs: {"records": recs + recs}, "a second record"),
    (lambda recs: {"format": "kiln-tuning/0"}, "expected kiln-tuning/1"),
    (lambda recs: {"records": [dict(recs[0], params=dict(recs[0]["params"], c1_step=0))]}, "positive integers"),
    (lambda recs: {"records": 5}, "must be a list"),
    (lambda recs: {"records": [dict(recs[0], opspec=["x"])]}, "must be strings"),
    (lambda recs: {"records": [dict(recs[0], family="gemm_cube")]}, "cannot implement a conv2d kernel"),
    # made under the costs before the memory system (no version) or another version: stale, refused
    (lambda recs: {"cost_model": None}, "made under cost model None"),
    (lambda recs: {"cost_model": "kiln-cost/1"}, "run `kiln tune` again"),
])
def test_bad_records_are_rejected_naming_the_problem(tmp_path, change, message):
    _, rec = conv_record(planned(tmp_path))
    data = {"format": "kiln-tuning/1", "profile": "ascend910b", "cost_model": COST_MODEL_VERSION, "records": [rec]}
    data.update(change([rec]))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(KilnError) as e:
        planned(tmp_path, path)
    assert message in str(e.value)


def test_kiln_tune_measures_candidates_on_the_emulator(tmp_path):
    import kiln
    if "bert_layer" not in kiln.models():
        pytest.skip("bert_layer not baked")
    out = tmp_path / "tuned.json"
    r = run([shutil.which("kiln") or "kiln", "tune", "bert_layer", "-k", "2", "-o", out,
             "--build-dir", tmp_path / "work"], env={**__import__("os").environ, "KILN_SOURCE_DIR": str(REPO)})
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "kiln-tuning/1" and data["records"] and data["cost_model"] == COST_MODEL_VERSION
    gemms = {k.record["opspec"] for k in kiln.kernels() if k.record["family"] == "gemm_cube"
             and any(i.startswith("bert_layer:") for i in k.record["instances"])}
    assert {x["opspec"] for x in data["records"]} == gemms
    for rec in data["records"]:
        assert rec["simulated_cycles"] == min(c["simulated_cycles"] for c in rec["candidates"])
        for c in rec["candidates"]:  # the cost model's prediction is what the emulator measured
            assert c["predicted_cycles"] == pytest.approx(c["simulated_cycles"], abs=1e-6)
    # and a build plan given those records takes every bert GEMM from them
    p = plan(parse_options({"KILN_MODELS": "bert_layer", "KILN_TUNING_RECORDS": str(out),
                            "DEBUG_OPTIMIZATION_PATH": "ON", "KILN_KERNEL_LIST": str(minimal_kernel_list(tmp_path))}),
             REPO, tmp_path)
    from_records = [ln for ln in p.log.lines if "reason=tuning_record" in ln]
    assert len(from_records) == len(gemms)


def test_explicit_options_outrank_a_winograd_record(tmp_path):
    _k, rec = conv_record(planned(tmp_path))
    rec = dict(rec, family="conv2d_winograd", params={"tile": 2, "tile_batch": 8, "c1_block": 1, "co1_block": 1,
                                                      "base_m": 64, "base_n": 64, "base_k1": 2, "c1_step": 1})
    kl = tmp_path / "k.toml"
    kl.write_text(KERNELS)
    p = plan(parse_options({"KILN_MODELS": "", "KILN_KERNEL_LIST": str(kl), "KILN_TUNING_RECORDS": str(write(
        tmp_path, [rec])), "FORCE_DIRECT_CONV": "ON", "DEBUG_OPTIMIZATION_PATH": "ON"}), REPO)
    conv = next(x for x in p.kernels if x.spec.kind == "conv2d")
    assert conv.variant.family == "conv2d_cube_img2col"
    assert any("tuning_record:skipped" in ln for ln in p.log.lines)


def test_a_record_beside_a_pinned_algorithm_of_the_same_spec_makes_two_kernels(tmp_path):
    _, rec = conv_record(planned(tmp_path))
    kl = tmp_path / "k.toml"
    kl.write_text(KERNELS + KERNELS.split("[[op]]")[1].join(["[[op]]", ""])
                  .replace('label = "t.conv"', 'label = "t.pin"')
                  .replace('activation = "Relu"', 'activation = "Relu"\nalgorithm = "direct_img2col"', 1))
    p = plan(parse_options({"KILN_MODELS": "", "KILN_KERNEL_LIST": str(kl),
                            "KILN_TUNING_RECORDS": str(write(tmp_path, [rec]))}), REPO)
    convs = [x for x in p.kernels if x.spec.kind == "conv2d"]
    assert len(convs) == 2 and len({x.symbol for x in convs}) == 2
