"""Every op case of tests/kiln/op_cases (single-op models made with onnx.helper) baked in one shared build and
compared with ONNX Runtime, output by output: max|got - ref| <= tol * max|ref|, and the same output shapes.
The build and the runs happen once per session (one configure, one compile, one subprocess that runs every
case); each case is then its own test, so a failure names the op and its attributes. Each case's kernels also
pass the isolated per-kernel check (kiln/isolate.py), every one with an ONNX counterpart (checked), and a case
that states its launch count has it."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, TEST_BUILD_TYPE, cmake_exe, minimal_kernel_list, run
from op_cases import all_cases

CASES = all_cases()

RUNNER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import onnxruntime as ort
    import kiln
    from kiln.validate import per_kernel
    sys.path.insert(0, sys.argv[1])
    from op_cases import all_cases
    results = {}
    for case in all_cases():
        try:
            m = kiln.load(case.name)
            feeds = case.feeds(0)
            ref_model = case.reference or case.model
            sess = ort.InferenceSession(ref_model.SerializeToString(), providers=["CPUExecutionProvider"])
            refs = sess.run(None, feeds)
            got = m.run(*[feeds[n] for n, _ in m.inputs])
            got = got if isinstance(got, list) else [got]
            rows = []
            for g, r in zip(got, refs):
                g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
                same = g.shape == r.shape
                err, nonfinite = None, 0
                if same:  # over the values both have finite; NaN/inf must be the same NaN/inf (the edge cases)
                    fin = np.isfinite(g) & np.isfinite(r)
                    nonfinite = int(np.count_nonzero(~fin & ~((g == r) | (np.isnan(g) & np.isnan(r)))))
                    scale = max(float(np.max(np.abs(r[fin]), initial=0.0)), 1e-30)
                    err = float(np.max(np.abs(g[fin] - r[fin]), initial=0.0)) / scale
                rows.append({"shape": list(g.shape), "ref_shape": list(r.shape), "rel_err": err,
                             "nonfinite": nonfinite})
            kernels = [{k: r.get(k) for k in ("step", "checked", "passed", "note", "error_ratio")}
                       for r in per_kernel(m)]
            results[case.name] = {"outputs": rows, "launches": m.kernel_launches, "kernels": kernels}
        except Exception as e:  # reported per case, so one broken op does not hide the others
            results[case.name] = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(results))
""")


@pytest.fixture(scope="session")
def op_results(tmp_path_factory):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import onnx
    root = tmp_path_factory.mktemp("ops")
    files = []
    for case in CASES:
        path = root / f"{case.name}.onnx"
        onnx.save(case.model, path)
        files.append(str(path))
    build = root / "build"
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    r = run([cmake_exe(), "-S", REPO, "-B", build, *gen, f"-DPython_EXECUTABLE={sys.executable}",
             *[f"-D{d}" for d in TEST_BUILD_TYPE], f"-DKILN_MODELS={';'.join(files)}",
             f"-DKILN_KERNEL_LIST={minimal_kernel_list(root)}"])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    r = run([cmake_exe(), "--build", build, "-j", "2"])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    pkg = root / "pkg" / "kiln"
    shutil.copytree(REPO / "python" / "kiln", pkg)
    shutil.copytree(REPO / "codegen", pkg / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(build / "generated" / "models", pkg / "models")
    for so in build.glob("_core*"):
        shutil.copy(so, pkg)
    env = dict(os.environ, PYTHONPATH=str(pkg.parent))
    r = subprocess.run([sys.executable, "-c", RUNNER, str(REPO / "tests" / "kiln")], capture_output=True,
                       text=True, env=env, cwd=root)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_matches_onnxruntime(op_results, case):
    res = op_results[case.name]
    assert "error" not in res, res["error"]
    for i, row in enumerate(res["outputs"]):
        assert row["shape"] == row["ref_shape"], (case.name, i, row)
        assert row["rel_err"] <= case.tol, (case.name, i, row["rel_err"], case.tol)
        assert row["nonfinite"] == 0, (case.name, i, "NaN/inf where ONNX Runtime differs", row["nonfinite"])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_op_kernels_pass_the_isolated_check(op_results, case):
    res = op_results[case.name]
    assert "error" not in res, res["error"]
    unchecked = [(r["step"], r["note"]) for r in res["kernels"] if not r["checked"]]
    assert not unchecked, unchecked
    failed = [(r["step"], r["error_ratio"]) for r in res["kernels"] if not r["passed"]]
    assert not failed, failed
    if case.launches is not None:
        assert res["launches"] == case.launches, (case.name, res["launches"])
