"""kiln's CMake package from a C++ project outside the repository (issue 21): find_package(kiln) through
`kiln --cmake-dir`, kiln_add_model() baking two models with different options into one program, the program
free of Python, bad input through the C++ API named, a bad option stopping configure, and an option change
re-baking only its model. One project is configured and built for the module (a few kernels)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, cmake_exe, run

sys.path.insert(0, str(REPO / "examples" / "cpp"))
from make_model import tiny_cnn

KILN = shutil.which("kiln") or str(Path(sys.executable).with_name("kiln"))  # the venv's console script

MAIN = r"""
#include <cstdio>
#include <fstream>
#include <vector>

#include "fused.hpp"
#include "unfused.hpp"

template <class M>
void report(const char* tag, const M& m, const std::vector<float>& x) {
  std::vector<float> y(10);
  kiln::RunStats s = m.run({{"input", {x.data(), x.size()}}}, {{"logits", {y.data(), y.size()}}});
  std::printf("%s", tag);
  for (float v : y) std::printf(" %.9g", v);
  std::printf(" | %.3f %zu\n", s.cycles, s.step_cycles.size());
}

template <class F>
void expect_error(F f) {
  try {
    f();
    std::printf("no error\n");
  } catch (const kiln::ModelError& e) {
    std::printf("error: %s\n", e.what());
  }
}

int main(int argc, char** argv) {
  std::ifstream file(argv[1], std::ios::binary);
  std::vector<float> x(3 * 32 * 32);
  file.read(reinterpret_cast<char*>(x.data()), x.size() * sizeof(float));
  kiln::model::fused::Model fused;
  kiln::model::unfused::Model unfused;
  report("fused", fused, x);
  report("unfused", unfused, x);
  std::vector<float> y(10);
  expect_error([&] { fused.run({{"image", {x.data(), x.size()}}}, {{"logits", {y.data(), y.size()}}}); });
  expect_error([&] { fused.run({{"input", {x.data(), 100}}}, {{"logits", {y.data(), y.size()}}}); });
  expect_error([&] { fused.run({{"input", {x.data(), x.size()}}}, {{"logits", {y.data(), 3}}}); });
  expect_error([&] { fused.run({{"input", {x.data(), x.size()}}}, {}); });
  kiln::model::fused::Inputs in;
  in.input = {nullptr, x.size()};
  kiln::model::fused::Outputs out;
  out.logits = {y.data(), y.size()};
  expect_error([&] { fused.run(in, out); });
  return 0;
}
"""


def project(directory: Path, unfused_options: str = "ENABLE_FUSION=OFF USE_WINOGRAD=ON") -> None:
    (directory / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_BUILD_TYPE Release)
find_package(kiln CONFIG REQUIRED)
kiln_add_model(fused MODEL tiny.onnx OPTIONS USE_WINOGRAD=OFF)
kiln_add_model(unfused MODEL tiny.onnx OPTIONS {unfused_options})
add_executable(app main.cpp)
target_link_libraries(app PRIVATE fused unfused)
""")


def cmake_dir() -> str:
    r = run([KILN, "--cmake-dir"])
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def configure(source: Path, build: Path) -> subprocess.CompletedProcess:
    return run([cmake_exe(), "-S", source, "-B", build, "-G", "Ninja", f"-Dkiln_DIR={cmake_dir()}",
                f"-DPython_EXECUTABLE={sys.executable}"])


@pytest.fixture(scope="module")
def consumer(tmp_path_factory):
    if shutil.which("ninja") is None:
        pytest.skip("ninja not on PATH")
    src = tmp_path_factory.mktemp("consumer")
    import onnx
    onnx.save(tiny_cnn(), src / "tiny.onnx")
    (src / "main.cpp").write_text(MAIN)
    project(src)
    build = src / "build"
    r = configure(src, build)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = run([cmake_exe(), "--build", build])
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
    x.tofile(src / "x.bin")
    out = run([build / "app", src / "x.bin"])
    assert out.returncode == 0, out.stderr
    return src, build, x, out.stdout.splitlines()


def test_cmake_dir_holds_the_package():
    assert (Path(cmake_dir()) / "kilnConfig.cmake").is_file()


def test_two_models_with_different_options_run_and_match_onnx_runtime(consumer):
    src, _, x, lines = consumer
    ort = pytest.importorskip("onnxruntime")
    want = ort.InferenceSession(str(src / "tiny.onnx")).run(None, {"input": x})[0].ravel()
    rows = {line.split()[0]: line for line in lines if line.startswith(("fused", "unfused"))}
    launches = {}
    for tag in ("fused", "unfused"):
        values, stats = rows[tag].split(" | ")
        got = np.array([float(v) for v in values.split()[1:]])
        np.testing.assert_allclose(got, want, rtol=0.02, atol=0.02)  # fp16 storage (docs/numerics.md)
        cycles, launches[tag] = float(stats.split()[0]), int(stats.split()[1])
        assert cycles > 0
    assert launches["unfused"] > launches["fused"]  # ENABLE_FUSION=OFF really reached its model alone


def test_bad_input_is_named_with_the_expected_shape(consumer):
    errors = [line for line in consumer[3] if line.startswith(("error", "no error"))]
    assert errors[0] == ("error: model 'tiny' has no input named 'image'; its inputs: input [1, 3, 32, 32]")
    assert errors[1] == "error: model 'tiny': input 'input' has 100 floats; expected 3072, shape [1, 3, 32, 32]"
    assert errors[2] == "error: model 'tiny': output 'logits' has 3 floats; expected 10, shape [1, 10]"
    assert errors[3].startswith("error: model 'tiny': output 'logits' [1, 10] not given")
    assert errors[4].startswith("error: model 'tiny': input 'input' is a null buffer; expected 3072 floats")


def test_the_program_has_no_python(consumer):
    app = consumer[1] / "app"
    if shutil.which("readelf") is None or shutil.which("nm") is None:
        pytest.skip("binutils (readelf, nm) not on PATH")
    needed = run(["readelf", "-d", app]).stdout
    assert "NEEDED" in needed and "python" not in needed.lower()
    symbols = run(["nm", app]).stdout.split("\n")
    assert not [s for s in symbols if re.search(r"\sPy[A-Z_]", s)]
    kernels = run(["nm", "-C", app]).stdout
    assert "kiln::kernels::fused::" in kernels and "kiln::kernels::unfused::" in kernels


def test_a_bad_option_stops_configure_naming_it(tmp_path):
    import onnx
    onnx.save(tiny_cnn(), tmp_path / "tiny.onnx")
    (tmp_path / "main.cpp").write_text("int main() { return 0; }\n")
    project(tmp_path, "USE_WINOGRAD=MAYBE")
    r = configure(tmp_path, tmp_path / "build")
    assert r.returncode != 0
    assert "kiln_add_model(unfused)" in r.stderr and "USE_WINOGRAD='MAYBE' is not valid" in r.stderr, r.stderr
    project(tmp_path, "KILN_TARGET=ascend310p")
    r = configure(tmp_path, tmp_path / "build")
    assert r.returncode != 0 and "one target per project" in r.stderr, r.stderr


def test_an_option_change_rebakes_only_its_model(consumer):
    src, build, _, _ = consumer
    project(src, "ENABLE_FUSION=OFF USE_WINOGRAD=OFF")  # the last test of the module: it edits the project
    try:
        r = configure(src, build)
        assert r.returncode == 0, r.stderr
        dry = run(["ninja", "-C", build, "-n"]).stdout
        steps = [line for line in dry.splitlines() if line.startswith("[")]
        assert steps and all("unfused" in s or "app" in s for s in steps), dry
        assert not [s for s in steps if "kiln_fused" in s or "/fused" in s or "libfused" in s], dry
    finally:
        project(src)


def test_the_example_equals_kiln_compile_bit_for_bit(tmp_path):
    """examples/cpp built against the installed package, run on an input file; the same model compiled for Python
    with the same option (`kiln compile`), run through kiln.load(DIR) on the same input: equal to the last bit.
    Then `kiln validate DIR` passes and a second compile rebuilds nothing."""
    example = tmp_path / "example"
    shutil.copytree(REPO / "examples" / "cpp", example, ignore=shutil.ignore_patterns("build", "*.onnx"))
    r = run([sys.executable, example / "make_model.py"])
    assert r.returncode == 0, r.stderr
    build = example / "build"
    r = configure(example, build)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = run([cmake_exe(), "--build", build])
    assert r.returncode == 0, r.stdout[-5000:] + r.stderr[-3000:]
    x = np.linspace(-1, 1, 3 * 32 * 32, dtype=np.float32)
    x.tofile(tmp_path / "x.bin")
    out = run([build / "kiln_example", tmp_path / "x.bin"])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[10].startswith("simulated cycles") and "ascend910b" in lines[10]
    cpp = np.array([float(v) for v in lines[:10]], dtype=np.float32)  # %.9g: every float32 exactly

    compiled = tmp_path / "tiny_kiln"
    r = run([KILN, "compile", example / "tiny_cnn.onnx", "-o", compiled, "--option", "USE_WINOGRAD=OFF"])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    import kiln
    y = kiln.load(str(compiled)).run(x.reshape(1, 3, 32, 32))
    assert y.ravel().tobytes() == cpp.tobytes()
    r = run([KILN, "validate", compiled, "--seeds", "2", "--per-kernel"])  # each kernel alone: the dir's own
    assert r.returncode == 0, r.stdout + r.stderr
    r = run([KILN, "kernels", compiled, "--json"])
    assert r.returncode == 0, r.stderr
    launches = int(lines[10].split(", ")[-1].split()[0])  # "... on ascend910b), 4 kernel launches"
    assert json.loads(r.stdout)["kernel_launches"] == launches
    own = set(kiln.load(str(compiled)).kernel_records) - {k.name for k in kiln.kernels()}
    assert own, "the test needs a kernel the installed build does not have"
    report = tmp_path / "tiny_report.html"
    r = run([KILN, "visualize", compiled, "-o", report])
    assert r.returncode == 0 and f"{launches} kernel launches" in r.stdout, r.stdout + r.stderr
    assert all(name in report.read_text() for name in own)
    r = run([KILN, "bench", compiled, "--peers", "ort", "--repeat", "1", "--warmup", "0", "--rounds", "1", "--json"])
    assert r.returncode == 0, r.stdout + r.stderr
    bench = json.loads(r.stdout)
    assert bench["model"] == "tiny_cnn" and [e["name"] for e in bench["engines"]] == ["kiln", "ort"]
    assert bench["engines"][0]["simulated_cycles"] == pytest.approx(float(lines[10].split()[2]))
    again = run([KILN, "compile", example / "tiny_cnn.onnx", "-o", compiled, "--option", "USE_WINOGRAD=OFF"])
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout + again.stderr
    bad = run([build / "kiln_example", tmp_path / "missing.bin"])
    assert bad.returncode == 2 and "cannot open" in bad.stderr


def test_kiln_compile_refuses_a_bad_option(tmp_path):
    import onnx
    onnx.save(tiny_cnn(), tmp_path / "tiny.onnx")
    r = run([KILN, "compile", tmp_path / "tiny.onnx", "-o", tmp_path / "out", "--option", "USE_WINOGRAD=MAYBE"])
    assert r.returncode == 2 and "USE_WINOGRAD='MAYBE' is not valid" in r.stderr, r.stderr
    r = run([KILN, "compile", tmp_path / "missing.onnx", "-o", tmp_path / "out"])
    assert r.returncode == 2 and "no such file" in r.stderr, r.stderr
