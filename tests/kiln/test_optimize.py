"""`kiln optimize MODEL --feedback`: the bottleneck kernels of a small CNN baked at KILN_OPT_LEVEL=O0 (the
plain rule tiling) get suggestions from the cost model, the loop rebuilds and measures them on the
emulator, keeps those that are faster as tuning records, and a build given the records uses them."""
import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, build_package
from test_fusion import small_cnn


@pytest.fixture(scope="module")
def o0_package(tmp_path_factory):
    root = tmp_path_factory.mktemp("optimize")
    model = small_cnn(root / "small.onnx")
    (root / "k.toml").write_text('[[op]]\nlabel = "k"\ntype = "Relu"\nshape = [16]\n')
    # kiln optimize rebuilds and reruns this build several times: Release, where the emulator runs fastest.
    build_package(root, f"KILN_MODELS={model}", f"KILN_KERNEL_LIST={root / 'k.toml'}", "KILN_OPT_LEVEL=O0",
                  "CMAKE_BUILD_TYPE=Release")
    return root, model


def test_feedback_applies_what_helps_and_reverts_what_does_not(o0_package):
    root, model = o0_package
    out = root / "records.json"
    env = dict(os.environ, PYTHONPATH=str(root / "pkg"), KILN_SOURCE_DIR=str(REPO))
    r = subprocess.run([sys.executable, "-m", "kiln.cli", "optimize", "small", "--feedback", "--threshold", "0.2",
                        "-o", str(out), "--build-dir", str(root / "work"), "--json"], capture_output=True, text=True,
                       env=env, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["kernels"], rep
    for k in rep["kernels"]:
        assert k["outcome"].startswith(("applied", "reverted", "no suggestion")), k
        if k["outcome"].startswith("applied"):
            assert k["simulated_after"] < k["simulated_before"]
            assert k["predicted_cycles"] == pytest.approx(k["simulated_after"], abs=1e-6)
    assert rep["applied"] >= 1, rep  # the rule tiling of this model leaves room
    assert rep["total_cycles_after"] < rep["total_cycles"]
    # a build plan given the records takes the applied variants from them
    from codegen.options import parse_options
    from codegen.pipeline import plan
    p = plan(parse_options({"KILN_MODELS": str(model), "KILN_KERNEL_LIST": str(root / "k.toml"),
                            "KILN_OPT_LEVEL": "O0", "KILN_TUNING_RECORDS": str(out),
                            "DEBUG_OPTIMIZATION_PATH": "ON"}), REPO, root)
    assert sum("reason=tuning_record" in ln for ln in p.log.lines) == rep["applied"]
