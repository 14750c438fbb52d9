"""The emulator and a sample of baked kernels under AddressSanitizer + UndefinedBehaviorSanitizer (issue 18): one
small build (the default kernel list's "odd." entries: every family at ragged shapes, plus a small fused CNN
model) compiled with -fsanitize=address,undefined, then this folder's kernel reference tests and a model run in
a subprocess that preloads the ASan runtime (Python itself is not instrumented; leak detection is off, since
the interpreter's own allocations would be reported). Any sanitizer report aborts that process and fails here.
Setup by hand: see docs/sanitizers.md."""
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from conftest import REPO, build_package

SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# The sanitizer builds' optimisation: -O1 (the level the sanitizers' documentation recommends; what they check does
# not need -O2's speed) with line tables for the reports' stack traces: a one-kernel ASan build takes 41 s instead
# of RelWithDebInfo's 63 s on 2 cores (kernels/module.cpp alone 39 s instead of 61 s)
SANITIZER_BUILD = ("CMAKE_BUILD_TYPE=RelWithDebInfo", "CMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")


def runtime(name: str) -> str:
    r = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True)
    path = r.stdout.strip()
    return path if r.returncode == 0 and os.path.isabs(path) and os.path.exists(path) else ""


def odd_kernel_list(path):
    ops = tomllib.loads((REPO / "kernels" / "default.toml").read_text())["op"]
    lines = []
    for op in ops:
        if not op["label"].startswith("odd."):
            continue
        lines.append("[[op]]")
        lines += [f"{k} = {_toml(v)}" for k, v in op.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def _toml(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return repr(v)


@pytest.fixture(scope="module")
def sanitized(tmp_path_factory):
    if not runtime("libasan.so") or not runtime("libstdc++.so"):
        pytest.skip("gcc's ASan runtime (libasan.so) or libstdc++.so is not installed")
    pytest.importorskip("onnx")
    from test_fusion import small_cnn
    root = tmp_path_factory.mktemp("sanitized")
    small_cnn(root / "small_fused.onnx")
    pkg = build_package(root, f"KILN_KERNEL_LIST={odd_kernel_list(root / 'odd.toml')}",
                        f"KILN_MODELS={root / 'small_fused.onnx'}", "KILN_ISA=portable", *SANITIZER_BUILD,
                        f"CMAKE_CXX_FLAGS={SANITIZE}", f"CMAKE_MODULE_LINKER_FLAGS={SANITIZE}",
                        f"CMAKE_SHARED_LINKER_FLAGS={SANITIZE}")
    # libstdc++ preloaded too: ASan's __cxa_throw interceptor must find it at startup, and Python does not link it
    env = dict(os.environ, PYTHONPATH=str(pkg), LD_PRELOAD=f"{runtime('libasan.so')} {runtime('libstdc++.so')}",
               ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:halt_on_error=1",
               UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1")
    return env


def test_the_build_is_instrumented(sanitized):
    """The module links the sanitizer runtimes, so a clean run below means clean code, not an unchecked one."""
    so = next((Path(sanitized["PYTHONPATH"]) / "kiln").glob("_core*.so"))
    deps = subprocess.run(["ldd", str(so)], capture_output=True, text=True).stdout
    assert "libasan" in deps and "libubsan" in deps, deps


def _no_report(r):
    out = r.stdout + r.stderr
    assert "ERROR: AddressSanitizer" not in out and "runtime error:" not in out, out[-6000:]
    assert r.returncode == 0, out[-6000:]


def test_kernel_references_under_asan_and_ubsan(sanitized, tmp_path):
    env = sanitized
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(REPO),
                        "-c", str(REPO / "pyproject.toml"), str(REPO / "tests" / "kernels" / "test_kernels.py"),
                        "-k", "not identical_specs"],  # that one is about the default kernel list's contents
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    _no_report(r)
    assert " passed" in r.stdout, r.stdout[-3000:]


def test_a_model_and_concurrent_calls_under_asan_and_ubsan(sanitized, tmp_path):
    env = sanitized
    script = textwrap.dedent("""
        from concurrent.futures import ThreadPoolExecutor
        import numpy as np, kiln
        m = kiln.load("small_fused")
        x = np.random.default_rng(0).standard_normal(m.inputs[0][1]).astype(np.float32)
        y = m.run(x)
        with ThreadPoolExecutor(4) as ex:
            ys = list(ex.map(lambda _: m.run(x), range(8)))
        assert all(np.array_equal(y, z) for z in ys)
        print("ok", m.kernel_launches)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    _no_report(r)
    assert r.stdout.startswith("ok"), r.stdout


TSAN = "-fsanitize=thread -fno-omit-frame-pointer"


@pytest.fixture(scope="module")
def tsan(tmp_path_factory):
    """An OpenMP-less ThreadSanitizer build: libgomp is not instrumented, so its internals would be reported as
    races; without OpenMP each kernel runs its blocks on the calling thread, and the concurrency checked is the
    executor's own: several Python threads (the module releases the GIL) running one model and two models."""
    if not runtime("libtsan.so") or not runtime("libstdc++.so"):
        pytest.skip("gcc's TSan runtime (libtsan.so) or libstdc++.so is not installed")
    pytest.importorskip("onnx")
    from test_fusion import small_cnn
    root = tmp_path_factory.mktemp("tsan")
    small_cnn(root / "small_fused.onnx")
    kl = root / "k.toml"
    kl.write_text('[[op]]\nlabel = "k"\ntype = "Relu"\nshape = [16]\n')
    pkg = build_package(root, f"KILN_KERNEL_LIST={kl}", f"KILN_MODELS={root / 'small_fused.onnx'};bert_layer@1",
                        "KILN_ISA=portable", *SANITIZER_BUILD, "CMAKE_DISABLE_FIND_PACKAGE_OpenMP=ON",
                        f"CMAKE_CXX_FLAGS={TSAN}", f"CMAKE_MODULE_LINKER_FLAGS={TSAN}",
                        f"CMAKE_SHARED_LINKER_FLAGS={TSAN}")
    return dict(os.environ, PYTHONPATH=str(pkg), LD_PRELOAD=f"{runtime('libtsan.so')} {runtime('libstdc++.so')}",
                TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:report_signal_unsafe=0")


def test_concurrent_models_under_tsan(tsan, tmp_path):
    script = textwrap.dedent("""
        from concurrent.futures import ThreadPoolExecutor
        import numpy as np, kiln
        models = [kiln.load("small_fused"), kiln.load("bert_layer")]
        xs = [np.random.default_rng(i).standard_normal(m.inputs[0][1]).astype(np.float32) for i, m in enumerate(models)]
        ref = [m.run(x) for m, x in zip(models, xs)]
        with ThreadPoolExecutor(4) as ex:
            got = list(ex.map(lambda i: models[i % 2].run(xs[i % 2]), range(8)))
        assert all(np.array_equal(g, ref[i % 2]) for i, g in enumerate(got))
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=tsan, cwd=tmp_path)
    out = r.stdout + r.stderr
    assert "WARNING: ThreadSanitizer" not in out, out[-8000:]
    assert r.returncode == 0 and r.stdout.startswith("ok"), out[-6000:]
