"""The model-spec grammar (frontend/model_spec.py), one parser for KILN_MODELS, `kiln analyze` and `kiln validate`:
`file.onnx@x=1x3x736x736+mask=1x736x736`, `name@32`; malformed specs name the spec and what is accepted; pinned
shapes reach the frontend; CMake's dependency list finds the file of a pinned spec."""
import shutil
import subprocess

import numpy as np
import pytest

from codegen import KilnError
from codegen.frontend.model_spec import GRAMMAR, parse_model_spec
from codegen.options import ZOO_MODELS, parse_options

REPO_CMAKE = __import__("pathlib").Path(__file__).resolve().parents[3] / "cmake" / "KilnCodegen.cmake"


@pytest.mark.parametrize("text,source,batch,pins,name", [
    ("resnet50", "resnet50", 1, (), "resnet50"),
    ("resnet50@32", "resnet50", 32, (), "resnet50_b32"),
    ("m/det.onnx", "m/det.onnx", 1, (), "det"),
    ("m/det.onnx@4", "m/det.onnx", 4, (), "det_b4"),
    ("det.onnx@x=1x3x736x736", "det.onnx", 1, (("x", (1, 3, 736, 736)),), "det_x1x3x736x736"),
    ("det.onnx@x=1x3x64x64+mask=1x64", "det.onnx", 1, (("x", (1, 3, 64, 64)), ("mask", (1, 64))),
     "det_x1x3x64x64_mask1x64"),
    ("a@b.onnx", "a@b.onnx", 1, (), "a@b"),             # an '@' inside the file name is kept
    ("a@b.onnx@2", "a@b.onnx", 2, (), "a@b_b2"),
    ("d.onnx@input.1=1x8", "d.onnx", 1, (("input.1", (1, 8)),), "d_input.11x8"),
])
def test_specs_parse(text, source, batch, pins, name):
    spec = parse_model_spec(text, ZOO_MODELS)
    stem = source if source in ZOO_MODELS else source.rsplit("/", 1)[-1][:-len(".onnx")]
    assert (spec.source, spec.batch, spec.pins, spec.name(stem)) == (source, batch, pins, name)


@pytest.mark.parametrize("text,why", [
    ("resnet51", "'resnet51' is neither a zoo model"),
    ("resnet50@x", "the batch after '@' must be an integer 1..4096, got 'x'"),
    ("resnet50@0", "the batch after '@' must be an integer 1..4096, got '0'"),
    ("resnet50@5000", "got '5000'"),
    ("resnet50@x=1x3", "input shapes can be pinned only for an .onnx file"),
    ("m.onnx@x=1x3,y=2", "holds no ',' or ';'"),
    ("m.onnx@x=", "the shape '' of input 'x' is not dims joined with 'x'"),
    ("m.onnx@x=1x-3", "the shape '1x-3' of input 'x'"),
    ("m.onnx@x=1x0x4", "input 'x' dim 0 is out of range"),
    ("m.onnx@x=1x3+x=1x3", "input 'x' is pinned twice"),
    ("m.onnx@=1x3", "'=1x3' is not INPUT=DxDx..."),
    ("m.onnx@x=1x3++y=2", "'' is not INPUT=DxDx..."),
    ("m.onnx@", "the batch after '@' must be an integer"),
    ("@4", "'@4' is neither a zoo model"),
    ("  ", "it is empty"),
])
def test_malformed_specs_name_the_spec_and_the_grammar(text, why):
    with pytest.raises(KilnError) as e:
        parse_model_spec(text, ZOO_MODELS)
    assert why in e.value.message, e.value.message
    assert e.value.subject == f"model spec {text.strip() or text!r}" or repr(text.strip()) in e.value.subject
    assert GRAMMAR in e.value.message


def test_kiln_models_entries_use_the_spec_parser(tmp_path, monkeypatch):
    from codegen.pipeline import check_model_entries
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes(b"")
    entries = parse_options({"KILN_MODELS": "resnet50@2;m.onnx@x=1x3x8x8+y=1x2"}).kiln_models
    assert entries == ("resnet50@2", "m.onnx@x=1x3x8x8+y=1x2")
    check_model_entries(entries)
    with pytest.raises(KilnError, match=r"model spec 'gone\.onnx@x=1x2'.*file 'gone\.onnx' does not exist"):
        check_model_entries(["gone.onnx@x=1x2"])
    with pytest.raises(KilnError, match="neither a zoo model"):
        check_model_entries(parse_options({"KILN_MODELS": "resnet51"}).kiln_models)


def test_check_options_refuses_a_malformed_spec(tmp_path):
    import json
    import sys
    options = tmp_path / "options.json"
    options.write_text(json.dumps({"KILN_MODELS": "resnet50@x"}))
    r = subprocess.run([sys.executable, "-B", "-m", "codegen", "check-options", str(options)],
                       cwd=REPO_CMAKE.parents[1], capture_output=True, text=True)
    assert r.returncode == 1 and "model spec 'resnet50@x'" in r.stderr and "Traceback" not in r.stderr


def test_pinned_shapes_bind_dynamic_dims(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import helper
    from test_frontend import init, save, tensor

    from codegen.frontend import onnx_import as onnx_frontend
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "bias"], ["y"], name="add")]
    path = save(tmp_path, nodes, [tensor("x", ["n", 3, "h", "w"]), tensor("bias", ["n", 8, "h", "w"])],
                [tensor("y", None)], [init("w", np.ones((8, 3, 3, 3), np.float32))])
    log = []
    spec = parse_model_spec(f"{path}@x=2x3x16x24+bias=2x8x16x24")
    g = onnx_frontend.load_onnx(path, log=log, pinned=spec.pinned)
    assert g.outputs[0].shape == (2, 8, 16, 24) and any("pinned to 2x3x16x24" in line for line in log)
    for pins, why in (({"x": (2, 3, 16, 24)}, "input 'bias' dim 2 ('h') is dynamic"),
                      ({"x": (2, 4, 16, 24), "bias": (2, 8, 16, 24)}, "input 'x' dim 1 is 3 in the model, but the "
                                                                       "spec pins it to 4"),
                      ({"x": (2, 3, 16), "bias": (2, 8, 16, 24)}, "input 'x' has rank 4 in the model, but the spec "
                                                                  "pins 3 dims"),
                      ({"z": (1,), "x": (2, 3, 4, 4), "bias": (2, 8, 4, 4)}, "pins input(s) 'z', which the model "
                                                                            "does not have; its inputs are 'x', "
                                                                            "'bias'")):
        with pytest.raises(KilnError) as e:
            onnx_frontend.load_onnx(path, pinned=pins)
        assert why in str(e.value), str(e.value)
    assert onnx is not None


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake on PATH")
def test_cmake_finds_the_file_of_every_spec(tmp_path):
    script = tmp_path / "files.cmake"
    script.write_text(f'include("{REPO_CMAKE}")\n'
                      '_kiln_model_files(files "resnet50;m/a.onnx@x=1x3x736x736+y=2;b@c.onnx@4,d.onnx;'
                      'e.onnx@x=1" "/src")\nmessage("${files}")\n')
    r = subprocess.run(["cmake", "-P", str(script)], capture_output=True, text=True, check=True)
    assert r.stderr.strip() == "/src/m/a.onnx;/src/b@c.onnx;/src/d.onnx;/src/e.onnx"


def test_analyze_takes_a_spec(tmp_path):
    pytest.importorskip("onnx")
    from onnx import helper
    from test_frontend import save, tensor

    from codegen import analyze
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [tensor("x", ["n", "c"])], [tensor("y", None)])
    r = analyze.analyze(f"{path}@x=2x48")
    assert r["inputs"] == {"x": [2, 48]} and r["pinned"] == {"x": [2, 48]} and r["unsupported"] == []
    assert r["model"] == str(path)
    with pytest.raises(KilnError, match=r"model spec .*@x=2x': the shape '2x' of input 'x'"):
        analyze.analyze(f"{path}@x=2x")
    with pytest.raises(KilnError, match="its batch 4 and the batch 2 given beside it differ"):
        analyze.analyze(f"{path}@4", batch=2)
    r = analyze.analyze(str(path))  # without pins the free second dim is what is refused
    assert any("dim 1 ('c') is dynamic" in p["reason"] for p in r["unsupported"])


def test_a_wrong_pin_is_the_one_problem_reported(tmp_path):
    # an input left unbound makes the shape chain behind it unfoldable: the pin is what to fix, not every node
    pytest.importorskip("onnx")
    from onnx import helper
    from test_frontend import init, save, tensor

    from codegen.frontend import onnx_import as onnx_frontend
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    path = save(tmp_path, nodes, [tensor("x", ["n", 4])], [tensor("y", None)], [init("unused", np.zeros(1))])
    problems = onnx_frontend.check_onnx(path, pinned={"x": (2, 5)})
    assert [p["reason"] for p in problems] == ["input 'x' dim 1 is 4 in the model, but the spec pins it to 5"]
