"""Bad input gets a clear error and nothing is lost (issue 18): the corpus of bad_inputs.py through the `kiln`
command line, then the same classes through the Python API."""
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from bad_inputs import corpus, fill, leftovers

import kiln

MODEL = "bert_layer" if "bert_layer" in kiln.models() else (kiln.models() or [""])[0]  # the fastest to run
RECORD = next((m for m in kiln.manifest()["models"] if m["name"] == MODEL), None)
KERNEL = next((s["kernel"] for s in RECORD["steps"] if s["kernel"]), "") if RECORD else ""
CASES = corpus(MODEL, RECORD, kiln.manifest()["profile"]) if RECORD else []
# variables a case sets itself, never inherited from the shell that runs the tests
CASE_VARIABLES = ("KILN_STRICT", "OMP_NUM_THREADS", "KILN_NUM_THREADS", "KILN_LOG")


def kiln_cmd() -> str:
    import shutil
    exe = shutil.which("kiln")
    if exe is None:
        pytest.fail("the kiln console script is not installed (pip install .)")
    return exe


@pytest.mark.skipif(not CASES, reason="no model baked")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_command_line_input(case, tmp_path):
    if case.setup:
        case.setup(tmp_path)
    before = set(tmp_path.rglob("*"))
    env = {k: v for k, v in os.environ.items() if k not in CASE_VARIABLES}
    env.update(TMPDIR=str(tmp_path), **case.env)
    argv = [kiln_cmd(), *(fill(a, model=MODEL, kernel=KERNEL) for a in case.argv)]
    r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    said = f"$ {' '.join(argv)}\nexit {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}"
    assert r.returncode == case.status, said
    assert "Traceback" not in r.stderr and "Segmentation" not in r.stderr, said
    for pattern in case.stderr:
        assert re.search(fill(pattern, model=MODEL), r.stderr), f"{pattern!r} not in stderr\n{said}"
    for pattern in case.stdout:
        assert re.search(pattern, r.stdout), f"{pattern!r} not in stdout\n{said}"
    for path in case.absent:
        assert not (tmp_path / fill(path, model=MODEL)).exists(), f"{path} was written\n{said}"
    for path, text in case.keeps:
        assert (tmp_path / path).read_text() == text, f"{path} changed\n{said}"
    assert not leftovers(tmp_path), said
    if case.status != 0:  # a refused command writes nothing at all
        assert set(tmp_path.rglob("*")) == before, said


def test_the_corpus_covers_every_class():
    ids = " ".join(c.id for c in CASES)
    for fragment in ("threads", "OMP_NUM_THREADS", "-o-dir", "chrome", "run-output", "profile", "--threshold",
                     "--max-seq-len", "--limit", "input-text", "input-npz", "strict", "analyze-zoo"):
        assert fragment in ids, fragment
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)


# ---- class 1 through the API ------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, -1, 10 ** 6, 10 ** 30, 2.5, True, "4", None])
def test_thread_counts_outside_the_bound_are_refused_by_the_extension_too(n):
    before = kiln.build_info()["threads"]
    for set_threads in (kiln.set_num_threads, kiln._core.set_num_threads):
        with pytest.raises(ValueError, match=rf"number of threads must be an integer 1\.\.{kiln.max_threads()} "):
            set_threads(n)
    assert kiln.build_info()["threads"] == before


def test_the_private_setter_of_a_bench_child_cannot_crash_openmp():
    r = subprocess.run([sys.executable, "-c", "import kiln; kiln._core.set_num_threads(100000)"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "ValueError: number of threads must be an integer 1.." in r.stderr, r.stderr


def test_bench_run_refuses_a_thread_count_beyond_the_bound():
    from kiln import bench
    with pytest.raises(bench.BenchError, match=r"--threads: expected an integer 1\.\."):
        bench.run(MODEL or "x", threads=100000)


# ---- class 7 through the API ------------------------------------------------------------------------------

def test_validate_counts_nan_outputs_instead_of_calling_them_exact():
    from kiln.validate import compare
    c = compare(np.full(4, np.nan, np.float32), np.ones(4, np.float32))
    assert c["nonfinite"] == 4 and c["cosine"] <= 0.0
    both = compare(np.array([np.nan, 1.0, np.inf]), np.array([np.nan, 1.0, np.inf]))
    assert both["nonfinite"] == 0 and both["cosine"] == 1.0 and both["max_abs_err"] == 0.0
    one = compare(np.array([1.0, 2.0, np.inf]), np.array([1.0, 2.5, 3.0]))
    assert one["nonfinite"] == 1 and one["max_abs_err"] == 0.5


def _kernel(family: str, **spec):
    for k in kiln.kernels():
        if k.family == family and all(k.spec.get(key) == v for key, v in spec.items()):
            return k
    pytest.skip(f"no baked {family} kernel with {spec}")


def test_kernel_operands_of_the_wrong_length_or_channels_are_named():
    g = _kernel("gemm_cube", bias=True)
    m, k, n = g.spec["m"], g.spec["k"], g.spec["n"]
    a, b = np.zeros((m, k)), np.zeros((k, n))
    with pytest.raises(ValueError, match=rf"kernel {g.name}, argument 'bias': expected shape \({n},\), got \(3,\)"):
        g(a, b, np.zeros(3))
    with pytest.raises(ValueError, match=r"argument 'b': expected shape"):
        g(a, np.zeros((k, n + 1)), np.zeros(n))
    with pytest.raises(TypeError, match=rf"kernel {g.name} takes 3 arguments \(a, b, bias\), got 2"):
        g(a, b)
    with pytest.raises(TypeError, match=r"argument 'a': expected real numbers"):
        g("abc", b, np.zeros(n))
    with pytest.raises(TypeError, match=r"packed input 0 must be a NumPy array, got list"):
        g.run_packed([1, 2], *g.pack(a, b, np.zeros(n))[1:])
    c = _kernel("conv2d_cube_img2col", mid=0, cin2=0, residual=False)
    s = c.spec
    if s["cin"] % 16:  # a channel more packs into the same C1 block: only the natural shape tells them apart
        x = np.zeros((s["n"], s["cin"] + 1, s["h"], s["w"]))
        w = np.zeros((s["cout"], s["cin"], s["kh"], s["kw"]))
        args = [x, w] + ([np.zeros(s["cout"])] if s["bias"] else [])
        with pytest.raises(ValueError, match=r"argument 'x': expected shape"):
            c(*args)


def test_a_model_input_that_is_not_numbers_names_the_input():
    m = kiln.load(MODEL)
    with pytest.raises(TypeError, match=rf"model {MODEL}, input '{m.inputs[0][0]}': expected an array of real"):
        m.run("abc")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a good input warns of nothing
        m.run(np.zeros(m.inputs[0][1], np.float32))


def test_log_takes_the_onnx_path_a_model_was_baked_from():
    if not kiln.build_info()["options"]["DEBUG_OPTIMIZATION_PATH"] or RECORD is None:
        pytest.skip("this build has no optimisation-path log (DEBUG_OPTIMIZATION_PATH=OFF)")
    by_name = subprocess.run([kiln_cmd(), "log", MODEL], capture_output=True, text=True, timeout=120)
    by_path = subprocess.run([kiln_cmd(), "log", RECORD["onnx"]], capture_output=True, text=True, timeout=120)
    assert by_path.returncode == 0 and by_path.stdout == by_name.stdout and by_name.stdout, by_path.stderr
