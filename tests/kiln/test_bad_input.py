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
                     "--max-seq-len", "--limit", "input-text", "input-npz", "strict", "analyze-zoo", "fifo", "dev-full",
                     "header-claims-more", "typo", "warnings-as-errors", "build-dir"):
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


def test_opspec_and_trace_take_the_onnx_path_a_model_was_baked_from():
    if RECORD is None:
        pytest.skip("no model baked")
    for verb in (("opspec",), ("trace", "--kernel", KERNEL, "--limit", "3")):
        by_name = subprocess.run([kiln_cmd(), verb[0], MODEL, *verb[1:]], capture_output=True, text=True, timeout=300)
        by_path = subprocess.run([kiln_cmd(), verb[0], RECORD["onnx"], *verb[1:]], capture_output=True, text=True,
                                 timeout=300)
        assert by_name.returncode == 0 and by_path.returncode == 0, by_path.stderr
        assert by_path.stdout == by_name.stdout, verb


# ---- outputs the disk refuses after the work (a full disk, a quota, a file-size limit) ---------------------

def _under_file_size_limit(argv: list[str], cwd, limit: int = 64 * 1024) -> subprocess.CompletedProcess:
    """`kiln ARGV` with RLIMIT_FSIZE set: a write beyond `limit` bytes fails with EFBIG, as on a full disk (Python
    ignores SIGXFSZ); TMPDIR is the case's directory."""
    import resource

    def limit_writes():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    env = {k: v for k, v in os.environ.items() if k not in CASE_VARIABLES}
    return subprocess.run([kiln_cmd(), *argv], cwd=cwd, env={**env, "TMPDIR": str(cwd)}, capture_output=True,
                          text=True, timeout=600, preexec_fn=limit_writes)


@pytest.mark.skipif(not CASES, reason="no model baked")
def test_a_report_the_disk_refuses_is_named_and_the_old_one_kept(tmp_path):
    (tmp_path / "r.html").write_text("the previous report")
    r = _under_file_size_limit(["visualize", MODEL, "-o", "r.html"], tmp_path, limit=4096)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert re.search(r"kiln visualize: r\.html: cannot write it \(File too large\); nothing was written", r.stderr)
    assert (tmp_path / "r.html").read_text() == "the previous report"
    assert not leftovers(tmp_path) and sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


@pytest.mark.skipif(not CASES, reason="no model baked")
def test_an_npy_output_the_disk_refuses_is_named_and_nothing_is_left(tmp_path):
    r = _under_file_size_limit(["run", MODEL, "--output", "y.npy"], tmp_path, limit=1024)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "y.npy: cannot write it (File too large); nothing was written" in r.stderr
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())


def test_analyze_says_when_the_temporary_directory_cannot_hold_the_onnx_file(tmp_path):
    r = _under_file_size_limit(["analyze", "resnet50"], tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "kiln analyze: resnet50: cannot write its ONNX file to the temporary directory" in r.stderr, r.stderr
    assert "set TMPDIR to a writable directory with room" in r.stderr
    assert not list(tmp_path.iterdir()), list(tmp_path.iterdir())


# ---- the readers of tuning records and profiles: files that block, JSON nested beyond the parser ----------

def test_a_tuning_file_that_is_a_fifo_or_nested_too_deep_is_named(tmp_path):
    from kiln.codegen import KilnError
    from kiln.codegen.ir.profiles import get_profile
    from kiln.codegen.select.tuning import load_records
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "deep.json").write_text("[" * 200000 + "]" * 200000)
    profile = get_profile(kiln.manifest()["profile"])
    with pytest.raises(KilnError, match=r"fifo\.json.*cannot read tuning records: not a regular file"):
        load_records(tmp_path / "fifo.json", profile)
    with pytest.raises(KilnError, match=r"deep\.json.*not valid UTF-8 JSON"):
        load_records(tmp_path / "deep.json", profile)


@pytest.mark.skipif(not CASES, reason="no model baked")
def test_a_profile_nested_too_deep_is_named(tmp_path):
    from kiln import visualize
    (tmp_path / "deep.json").write_text("{\"a\": " * 100000 + "1" + "}" * 100000)
    with pytest.raises(visualize.ProfileError, match=r"deep\.json: not a kiln profile, the JSON does not parse"):
        visualize.load_profile(tmp_path / "deep.json", MODEL, [], kiln.manifest()["profile"])


# ---- the Python API: arguments pybind11 would answer with its signature dump ---------------------------------

def _core_calls():
    c = kiln.Core("ascend910b", "AIC")
    v = kiln.Core("ascend910b", "AIV")
    ub = v.alloc("UB", 128)
    return [
        (lambda: kiln.Core(3), TypeError, r"Core: argument 'profile' must be a str, got int"),
        (lambda: c.alloc("L1", 2.5), TypeError, r"Core\.alloc: argument 'count' must be an integer 0\.\."),
        (lambda: c.alloc("L1", -1), ValueError, r"Core\.alloc: argument 'count' must be an integer 0\.\..*got -1"),
        (lambda: c.alloc(3, 16), TypeError, r"Core\.alloc: argument 'buffer' must be a str"),
        (lambda: c.at("L1", -4, 16), ValueError, r"Core\.at: argument 'byte_offset' must be an integer 0\.\."),
        (lambda: c.copy_in("t", np.zeros(16)), TypeError, r"Core\.copy_in: argument 'dst' must be a kiln Tensor"),
        (lambda: c.copy_in(c.alloc("L1", 16), "abc"), TypeError, r"Core\.copy_in: argument 'src' must be an array of"),
        (lambda: c.load2d(c.alloc("L0A", 256), c.alloc("L1", 256), 1.0), TypeError,
         r"Core\.load2d: argument 'repeat' must be an integer"),
        (lambda: c.mmad(None, None, None, 16, 16, 16), TypeError, r"Core\.mmad: argument 'c' must be a kiln Tensor"),
        (lambda: v.vector("relu", ub, ub, mask=200), ValueError, r"Core\.vector: argument 'mask.*0\.\.128, got 200"),
        (lambda: v.vector("relu", ub, ub, strides=[1]), TypeError, r"Core\.vector: argument 'strides' must be a dict"),
        (lambda: v.vector("relu", ub, ub, strides={"dst_blk": -1}), ValueError, r"strides\['dst_blk'\]"),
        (lambda: v.vector("relu", ub, ub, stride={"dst_blk": 1}), TypeError,
         r"Core\.vector: unexpected argument\(s\) 'stride'; accepted: op, dst, src0, src1, repeat, mask, scalar"),
        (lambda: v.vector("add", ub, ub, "x"), TypeError, r"Core\.vector: argument 'src1' must be a kiln Tensor"),
        (lambda: v.vector("muls", ub, ub, scalar="2"), TypeError, r"Core\.vector: argument 'scalar' must be a real"),
        (lambda: v.set_flag("V", "MTE3", 10 ** 12), ValueError, r"Core\.set_flag: argument 'event_id'"),
        (lambda: v.set_flag("V", "MTE3", 1.0), TypeError, r"Core\.set_flag: argument 'event_id'"),
    ]


def test_core_arguments_of_the_wrong_type_or_range_are_named():
    for call, error, message in _core_calls():
        with pytest.raises(error, match=message) as e:
            call()
        assert "Invoked with" not in str(e.value) and "incompatible function arguments" not in str(e.value)


def test_numpy_integers_are_counts_and_bools_are_not():
    before = kiln.build_info()["threads"]
    kiln.set_num_threads(np.int64(1))
    assert kiln.build_info()["threads"] == 1
    kiln.set_num_threads(before)
    c = kiln.Core()
    assert c.alloc("L1", np.int32(16)).count == 16
    with pytest.raises(TypeError, match=r"argument 'count' must be an integer"):
        c.alloc("L1", True)


def test_load_and_kernel_take_names():
    with pytest.raises(TypeError, match=r"kiln\.load: expected a model name, ONNX path or model spec \(a str\), got"):
        kiln.load(3)
    with pytest.raises(TypeError, match=r"kiln\.kernel: expected a kernel name \(a str\), got NoneType"):
        kiln.kernel(None)


@pytest.mark.skipif(not CASES, reason="no model baked")
def test_run_out_arrays_are_checked_naming_the_output():
    m = kiln.load(MODEL)
    x = np.zeros(m.inputs[0][1], np.float32)
    shape, name = tuple(m.outputs[0][1]), m.outputs[0][0]
    where = rf"model {MODEL}, out\[0\] \(output '{name}'\): expected a writable C-contiguous float32 array"
    read_only = np.zeros(shape, np.float32)
    read_only.flags.writeable = False
    for out, error, message in [
        (5, TypeError, rf"model {MODEL}: out must be a NumPy array or a list of one per output"),
        ([1, 2, 3], ValueError, rf"model {MODEL}: out must hold one array per output"),
        ([[1.0]], TypeError, rf"model {MODEL}, out\[0\] \(output '{name}'\): expected a float32 NumPy array"),
        (np.zeros(3, np.float32), ValueError, where + r".*got shape \(3,\)"),
        (np.zeros(shape, np.float64), ValueError, where + ".*got dtype float64"),
        (read_only, ValueError, where + ".*got read-only"),
        (np.zeros(shape[::-1], np.float32).T, ValueError, where + ".*not C-contiguous"),
    ]:
        with pytest.raises(error, match=message):
            m.run(x, out=out)
    with pytest.raises(TypeError, match=rf"model {MODEL}: strict must be True, False or None"):
        m.run(x, strict="yes")


@pytest.mark.skipif(not CASES, reason="no model baked")
def test_an_out_array_that_is_the_input_gives_the_result_of_distinct_arrays():
    m = kiln.load(MODEL)
    if tuple(m.inputs[0][1]) != tuple(m.outputs[0][1]) or len(m.outputs) != 1:
        pytest.skip(f"{MODEL}'s output is not shaped like its input")
    x = np.random.default_rng(0).standard_normal(m.inputs[0][1]).astype(np.float32)
    want = m.run(x.copy())
    got = m.run(x, out=x)
    assert got is x and np.array_equal(got, want)


def test_kernel_operands_beyond_fp16_are_said_by_name_and_packed_outputs_checked(monkeypatch):
    from kiln import numerics
    monkeypatch.setattr(numerics, "_warned", set())
    monkeypatch.delenv("KILN_STRICT", raising=False)
    g = _kernel("gemm_cube", bias=True)
    m, k, n = g.spec["m"], g.spec["k"], g.spec["n"]
    with pytest.warns(kiln.NumericsWarning, match=rf"kernel {g.name}, argument 'a': .*beyond fp16's range") as w:
        g(np.full((m, k), 1e5), np.zeros((k, n)), np.full(n, 1e6))  # the fp32 bias holds 1e6: not said
    assert not [x for x in w if "'bias'" in str(x.message)]
    monkeypatch.setenv("KILN_STRICT", "1")
    with pytest.raises(kiln.NumericsError, match=rf"kernel {g.name}, argument 'b'"):
        g(np.zeros((m, k)), np.full((k, n), np.nan), np.zeros(n))
    with pytest.raises(TypeError, match=rf"kernel {g.name}: unpack takes the kernel's packed output \(float16, shape"):
        g.unpack(np.zeros(3))
