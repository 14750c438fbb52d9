"""`kiln analyze --predict` (codegen/analyze.py predict_launches) against a build of the same model and options:
per kernel launch the same kernel, family, tiling and predicted figures `kiln kernels MODEL --json` reports, and
the same totals (issue 22 point 7: the prediction before baking is the build's report)."""
import json

import pytest
from conftest import run

import kiln
from codegen.analyze import AnalysisSettings, analyze
from codegen.frontend import zoo

FIELDS = ("name", "family", "tiling", "predicted_cycles", "core_cycles", "bound", "l2_hit_bytes", "hbm_bytes",
          "cube_utilization", "vector_utilization")
# The build options analyze's defaults stand for; another build would bake other kernels.
DEFAULTS = {"ENABLE_FUSION": True, "USE_WINOGRAD": "AUTO", "USE_FLASH_ATTENTION": True, "MAX_SEQ_LEN": 512,
            "KILN_DTYPE": "fp16", "KILN_TUNING_RECORDS": ""}


def _build_report(name: str) -> dict:
    r = run(["kiln", "kernels", name, "--json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", ["bert_layer", "mobilenet_v2"])
def test_prediction_equals_the_build(name, tmp_path):
    options = kiln.manifest()["options"]
    if name not in kiln.models() or any(options.get(k, v) != v for k, v in DEFAULTS.items()):
        pytest.skip("needs the default build")
    onnx_file = zoo.write(name, str(tmp_path / f"{name}.onnx"))
    settings = AnalysisSettings(target=kiln.build_info()["profile"])
    pr = analyze(str(onnx_file), settings=settings, prediction=True)["prediction"]
    built = _build_report(name)
    assert pr["profile"] == built["profile"] and pr["kernel_launches"] == built["kernel_launches"]
    for got, want in zip(pr["kernels"], built["kernels"]):
        assert {f: got[f] for f in FIELDS} == {f: want[f] for f in FIELDS}, got["step"]
    assert pr["bounds"] == built["bounds"] and pr["mean_cube_utilization"] == built["mean_cube_utilization"]
    # the build sums the emulator's unrounded cycles; the prediction the records' (rounded to 0.001 each)
    assert pr["cycles"] == pytest.approx(built["simulated_cycles"], abs=1e-3 * pr["kernel_launches"])


def test_prediction_is_opt_in(tmp_path):
    report = analyze(str(zoo.write("bert_layer", tmp_path / "bert_layer.onnx")))
    assert "prediction" not in report
