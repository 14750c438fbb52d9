"""Build integration: CMake configure checks the options, the codegen runs as a
build step whose outputs stay in the build directory, rebuilds are incremental,
a failing codegen fails the build with its own message and leaves no
half-written file, and the portable (no SIMD flags) path computes correct
results. Uses tiny kernel lists so each build takes seconds."""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, TEST_BUILD_TYPE, cmake_exe, run

TINY = textwrap.dedent("""
    [[op]]
    label = "tiny.gemm"
    type = "Gemm"
    a = [20, 40]
    b = [40, 24]
    bias = true
    activation = "Relu"

    [[op]]
    label = "tiny.conv"
    type = "Conv"
    input = [1, 5, 9, 7]
    weight = [6, 5, 3, 3]
    strides = [2, 1]
    pads = [1, 1, 1, 1]
    bias = true

    [[op]]
    label = "tiny.add"
    type = "Add"
    shape = [3, 50]
""")


def generator_args():
    return ["-G", "Ninja"] if shutil.which("ninja") else []


def configure(src: Path, build: Path, *defines: str) -> subprocess.CompletedProcess:
    """Configures with no models unless the defines name some (the zoo takes minutes to compile)."""
    models = [] if any(d.startswith("KILN_MODELS=") for d in defines) else ["-DKILN_MODELS="]
    return run([cmake_exe(), "-S", src, "-B", build, *generator_args(), f"-DPython_EXECUTABLE={sys.executable}",
                *models, *[f"-D{d}" for d in defines]])


def build_cmd(build: Path) -> subprocess.CompletedProcess:
    return run([cmake_exe(), "--build", build, "-j", "2"])


@pytest.mark.parametrize("define,message", [
    ("MAX_FUSION_DEPTH=abc", "MAX_FUSION_DEPTH='abc' is not valid: expected an integer 1..8"),
    ("USE_WINOGRAD=MAYBE", "USE_WINOGRAD='MAYBE' is not valid: expected one of ON, OFF, AUTO, F2, F4"),
    ("KILN_TARGET=ascend999", "KILN_TARGET='ascend999' is not valid: expected one of ascend910b, ascend310p"),
    ("KILN_DTYPE=fp8", "KILN_DTYPE='fp8' is not valid: expected one of fp16, bf16"),
])
def test_configure_rejects_bad_option(tmp_path, define, message):
    r = configure(REPO, tmp_path / "b", define)
    assert r.returncode != 0
    assert message in " ".join((r.stderr + r.stdout).split())


def test_configure_rejects_unsupported_op_naming_it(tmp_path):
    kl = tmp_path / "bad.toml"
    kl.write_text('[[op]]\nlabel = "net.nms_3"\ntype = "NonMaxSuppression"\nshape = [2, 3]\n')
    r = configure(REPO, tmp_path / "b", f"KILN_KERNEL_LIST={kl}")
    assert r.returncode != 0
    text = " ".join((r.stderr + r.stdout).split())
    assert "stage 'frontend'" in text and "net.nms_3" in text and "Supported: Conv" in text


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A copy of the sources (so tests may edit templates) configured and built with a tiny kernel list."""
    root = tmp_path_factory.mktemp("tiny")
    src = root / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for part in ("CMakeLists.txt", "cmake", "codegen", "templates", "kernels", "python"):
        s = REPO / part
        if s.is_dir():
            shutil.copytree(s, src / part, ignore=ignore)
        else:
            shutil.copy(s, src / part)
    kl = root / "tiny.toml"
    kl.write_text(TINY)
    build = root / "build"
    r = configure(src, build, f"KILN_KERNEL_LIST={kl}", "KILN_ISA=portable", "DEBUG_OPTIMIZATION_PATH=ON",
                  *TEST_BUILD_TYPE)
    assert r.returncode == 0, r.stderr
    assert "kiln: host ISA portable (forced by KILN_ISA)" in r.stdout
    r = build_cmd(build)
    assert r.returncode == 0, r.stdout + r.stderr
    return {"src": src, "build": build, "kernel_list": kl}


def test_generated_files_live_in_the_build_dir(tiny):
    gen = tiny["build"] / "generated"
    assert (gen / "manifest.json").is_file() and (gen / "optimization_path.log").is_file()
    assert len(list((gen / "kernels").glob("*.cpp"))) == 3
    assert len(list((gen / "opspecs").glob("*.opspec"))) == 3
    src_files = {p.relative_to(tiny["src"]) for p in tiny["src"].rglob("*") if p.is_file()}
    assert not any(p.suffix in (".cpp", ".opspec", ".json") and p.parts[0] != "kernels" for p in src_files)
    assert not any("__pycache__" in p.parts for p in src_files)


def test_unchanged_rebuild_does_nothing(tiny):
    r = build_cmd(tiny["build"])
    assert r.returncode == 0
    assert "Building" not in r.stdout and "generating kernels" not in r.stdout, r.stdout


def compiled_objects(out: str) -> list[str]:
    return [line for line in out.splitlines() if "Building CXX object" in line]


def test_template_edit_recompiles_only_its_kernels(tiny):
    t = tiny["src"] / "templates" / "gemm_cube.cpp.j2"
    original = t.read_text()
    try:
        t.write_text(original + "// an edit\n")
        r = build_cmd(tiny["build"])
        assert r.returncode == 0, r.stdout
        assert "kiln: generating kernels" in r.stdout
        objs = compiled_objects(r.stdout)
        assert len(objs) == 1 and "gemm_cube" in objs[0], objs
    finally:
        t.write_text(original)
        assert build_cmd(tiny["build"]).returncode == 0


def test_option_change_regenerates(tiny):
    r = configure(tiny["src"], tiny["build"], "MAX_FUSION_DEPTH=6")  # the default (O2) is 5
    assert r.returncode == 0, r.stderr
    r = build_cmd(tiny["build"])
    assert r.returncode == 0 and "kiln: generating kernels" in r.stdout
    # The options are recorded in the manifest, compiled into the small kernel_table.cpp (not into the
    # pybind11 module); kernels and the emulation library are untouched.
    objs = compiled_objects(r.stdout)
    assert objs and all("kernel_table.cpp" in o for o in objs), objs
    assert '"MAX_FUSION_DEPTH": 6' in (tiny["build"] / "generated" / "manifest.json").read_text()


def test_build_time_codegen_reuses_the_configure_time_search(tiny):
    """Configure plans the kernels (to list the files) and the build plans them again: the search runs once,
    at configure (KILN_OPT_LEVEL is read by every kernel's search: O0 keeps the rule tilings), and the
    build-time run takes all three results from the cache."""
    try:
        r = configure(tiny["src"], tiny["build"], "KILN_OPT_LEVEL=O0")
        assert r.returncode == 0, r.stderr
        assert "search: 3 kernels, 0 from the cache" in r.stderr, r.stderr
        r = build_cmd(tiny["build"])
        out = r.stdout + r.stderr  # the codegen's progress goes to the terminal (ninja's console pool)
        assert r.returncode == 0, out
        assert "search: 3 kernels, 3 from the cache" in out and "searching 0" in out, out
        assert "Building CXX object CMakeFiles/kiln_emu.dir" not in r.stdout  # the emulation layer is untouched
    finally:
        assert configure(tiny["src"], tiny["build"], "KILN_OPT_LEVEL=O2").returncode == 0
        assert build_cmd(tiny["build"]).returncode == 0


def test_codegen_failure_fails_build_and_leaves_outputs_whole(tiny):
    gen = tiny["build"] / "generated"
    kernel_src = next((gen / "kernels").glob("gemm_cube_*.cpp"))
    before = kernel_src.read_text()
    t = tiny["src"] / "templates" / "gemm_cube.cpp.j2"
    original = t.read_text()
    try:
        t.write_text("{% for x in %}broken")
        r = build_cmd(tiny["build"])
        assert r.returncode != 0
        out = " ".join((r.stdout + r.stderr).split())
        assert "error in stage 'render' for gemm_cube_m20_k40_n24_bias_relu" in out, out[-2000:]
        assert kernel_src.read_text() == before
        assert not (gen / ".codegen.stamp").exists()
        assert not list(gen.rglob("*.tmp"))
    finally:
        t.write_text(original)
    r = build_cmd(tiny["build"])
    assert r.returncode == 0, r.stdout


def test_portable_build_computes_correct_results(tiny, tmp_path):
    pkg = tmp_path / "pkg" / "kiln"
    shutil.copytree(tiny["src"] / "python" / "kiln", pkg)
    # as installed: the runtime reads its manifest through kiln.codegen's typed records
    shutil.copytree(tiny["src"] / "codegen", pkg / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    for so in tiny["build"].glob("_core*"):
        shutil.copy(so, pkg)
    script = textwrap.dedent("""
        import numpy as np, kiln
        from kiln import reference as ref
        assert kiln.build_info()["isa"] == "portable"
        rng = np.random.default_rng(3)
        k = kiln.kernel("gemm_cube_m20_k40_n24_bias_relu")
        a, b, bias = rng.standard_normal((20, 40)), rng.standard_normal((40, 24)), rng.standard_normal(24)
        y = k(a, b, bias).astype(np.float64)
        want = ref.gemm(ref.f16(a), ref.f16(b), bias.astype(np.float32), relu=True)
        bound = ref.bound(want, ref.gemm(np.abs(ref.f16(a)), np.abs(ref.f16(b)), np.abs(bias)), 40)
        assert np.all(np.abs(y - want) <= bound), np.abs(y - want).max()
        c = kiln.kernel("conv2d_cube_img2col_1x5x9x7_o6_k3x3_s2x1_p1_bias")
        x, w, cb = rng.standard_normal((1, 5, 9, 7)), rng.standard_normal((6, 5, 3, 3)), rng.standard_normal(6)
        y = c(x, w, cb).astype(np.float64)
        want = ref.conv2d_nchw(ref.f16(x), ref.f16(w), cb.astype(np.float32), (2, 1), (1, 1, 1, 1))
        absw = ref.conv2d_nchw(np.abs(ref.f16(x)), np.abs(ref.f16(w)), np.abs(cb), (2, 1), (1, 1, 1, 1))
        assert np.all(np.abs(y - want) <= ref.bound(want, absw, 45))
        e = kiln.kernel("eltwise_vector_add_150")
        p, q = rng.standard_normal((3, 50)).astype(np.float16), rng.standard_normal((3, 50)).astype(np.float16)
        np.testing.assert_array_equal(e(p, q), p + q)
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=str(pkg.parent))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_configure_rejects_onnx_with_unsupported_op(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.INT64, None)  # no kernel, no static shape: not even AI CPU
    node = helper.make_node("NonZero", ["x"], ["y"], name="head.nonzero")
    model = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "bad.onnx"
    onnx.save(model, str(path))
    r = configure(REPO, tmp_path / "b", f"KILN_MODELS={path}")
    assert r.returncode != 0
    text = " ".join((r.stderr + r.stdout).split())
    assert "head.nonzero" in text and "NonZero" in text and "opset 17" in text, text[-1500:]


@pytest.fixture(scope="module")
def shared_mobilenet(tmp_path_factory):
    """One build of a BERT layer as the torch exporter writes it (decomposed LayerNorm and GELU, view chains,
    Dropout; small dims) and a small CNN with every fusion kind. The torchvision exports in shared/models are
    baked and validated by the corpus build (test_corpus.py)."""
    pytest.importorskip("onnx")
    from test_frontend import bert_layer
    from test_fusion import small_cnn
    root = tmp_path_factory.mktemp("shared_mobilenet")
    bert = bert_layer(root, 17)
    small = small_cnn(root / "small_fused.onnx")  # every fusion kind: Fixpipe, Vector pass, Vector-core pass
    kl = root / "one.toml"
    kl.write_text('[[op]]\nlabel = "x"\ntype = "Relu"\nshape = [16]\n')
    build = root / "build"
    r = configure(REPO, build, f"KILN_MODELS={bert};{small}", f"KILN_KERNEL_LIST={kl}", *TEST_BUILD_TYPE)
    assert r.returncode == 0, r.stderr
    r = build_cmd(build)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    pkg = root / "pkg" / "kiln"
    shutil.copytree(REPO / "python" / "kiln", pkg)
    shutil.copytree(REPO / "codegen", pkg / "codegen", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(build / "generated" / "models", pkg / "models")
    shutil.copy(build / "generated" / "manifest.json", pkg)
    for so in build.glob("_core*"):
        shutil.copy(so, pkg)
    return pkg.parent


@pytest.mark.parametrize("model", ["bert_torch", "small_fused"])
def test_real_exports_validate(shared_mobilenet, tmp_path, model):
    pytest.importorskip("onnxruntime")
    script = textwrap.dedent(f"""
        import json, kiln
        from kiln.validate import validate, per_kernel
        names = kiln.models()
        m = kiln.load("small_fused" if "{model}" == "small_fused" else [n for n in names if n != "small_fused"][0])
        r = validate(m, seeds=(0, 1))
        if m.name == "small_fused":  # every fusion kind, checked kernel by kernel (shallow: no compounding)
            bad = [k for k in per_kernel(m) if k["cosine"] < 0.9999]
            assert not bad, bad
        print(json.dumps({{"passed": r["passed"], "cosine": r["outputs"][0]["cosine"],
                          "launches": m.kernel_launches}}))
    """)
    env = dict(os.environ, PYTHONPATH=str(shared_mobilenet))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    import json
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["passed"] and res["cosine"] >= 0.999, res
