"""The C++ API render (codegen/emit/cpp_api.py) of kiln_add_model: names, the per-model kernel namespace, the
plan tables, and the options file it is configured with. Nothing is compiled here (tests/kiln/test_cpp_package.py
builds and runs it)."""
import json
import re

import numpy as np
import onnx
import pytest
from conftest import REPO
from onnx import TensorProto, helper, numpy_helper

from codegen import KilnError
from codegen import __main__ as cli
from codegen.emit.cpp_api import asm_string, check_api_name, member_names
from codegen.emit.render import CppApi, output_files, render
from codegen.options import OptionError, model_options, parse_options
from codegen.pipeline import plan


def test_every_kernel_template_renders_into_the_kernel_namespace():
    for path in sorted((REPO / "templates").glob("*.cpp.j2")):
        if path.name.startswith("cpp_model"):
            continue
        text = path.read_text()
        for included in re.findall(r'{% include "([^"]+)" %}', text):  # a family built on another's template
            text += (REPO / "templates" / included).read_text()
        assert "namespace {{ kernel_namespace }} {" in text, path.name
        assert "namespace kiln::kernels {" not in text, path.name


def test_names_become_identifiers():
    assert member_names(["input.1", "1x", "class", "a-b", "a_b"]) == ["input_1", "_1x", "_class", "a_b", "a_b_2"]
    for bad in ("1net", "net-2", "class", ""):
        with pytest.raises(KilnError, match="C identifier"):
            check_api_name(bad)
    check_api_name("tiny_cnn")


def test_asm_paths_are_escaped(tmp_path):
    assert asm_string(tmp_path / 'a"b') == str(tmp_path) + '/a\\\\\\"b'
    with pytest.raises(KilnError, match="line break"):
        asm_string(tmp_path / "a\nb")


def test_model_options_are_checked_like_the_build():
    raw = model_options("m.onnx", ["USE_WINOGRAD=OFF", "ENABLE_FUSION=ON"], "avx2")
    assert raw["USE_WINOGRAD"] == "OFF" and raw["KILN_MODELS"] == "m.onnx" and parse_options(raw)
    for settings, message in ((["USE_WINOGRAD=MAYBE"], "USE_WINOGRAD='MAYBE' is not valid"),
                              (["USE_WINOGRAD"], "expected NAME=VALUE"),
                              (["USE_WINOGRD=OFF"], "unknown option USE_WINOGRD"),
                              (["KILN_SHAPE_BUCKETS=224"], "cannot be set per model"),
                              (["KILN_MODELS=resnet50"], "cannot be set per model"),
                              (["USE_WINOGRAD=ON", "USE_WINOGRAD=OFF"], "given twice")):
        with pytest.raises(OptionError, match=message):
            model_options("m.onnx", settings, "avx2")


def test_the_options_file_is_rewritten_only_when_it_changes(tmp_path):
    out = tmp_path / "options.json"
    args = ["model-options", str(out), "--model", "resnet50", "--isa-resolved", "avx2", "--set", "USE_WINOGRAD=OFF"]
    assert cli.main(args) == 0
    first = out.stat().st_mtime_ns
    assert cli.main(args) == 0 and out.stat().st_mtime_ns == first
    assert json.loads(out.read_text())["USE_WINOGRAD"] == "OFF"
    assert cli.main(args[:-1] + ["USE_WINOGRAD=MAYBE"]) == 2


def _tiny(path):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["input.1", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
                           helper.make_node("Relu", ["c"], ["out"])], "tiny",
                          [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 16, 8, 8])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_render_puts_the_kernels_in_the_models_namespace(tmp_path):
    _tiny(tmp_path / "tiny.onnx")
    opts = parse_options({"KILN_MODELS": str(tmp_path / "tiny.onnx")})
    api = CppApi("net", tmp_path / "gen")
    p = plan(opts, REPO, tmp_path, kernel_list=False)
    files = render(p, cpp_api=api)
    assert sorted(files) == sorted(output_files(p, api))
    kernels = [name for name in files if name.startswith("kernels/")]
    assert kernels and all("namespace kiln::kernels::net {" in str(files[k]) for k in kernels)
    header, tables = str(files["net.hpp"]), str(files["net_model.cpp"])
    assert "namespace kiln::model::net {" in header and "ConstBuffer input_1;  // \"input.1\"" in header
    assert "input_1_shape = {1, 3, 8, 8}" in header
    assert f'.incbin \\"{(tmp_path / "gen").resolve()}/models/tiny.weights.bin\\"' in tables
    assert tables.count("s[") > 0 and "ModelTables{\"tiny\"" in tables
    default = render(p)  # the same plan in kiln's own build: the namespace it always had
    assert all("namespace kiln::kernels {" in str(default[k]) for k in kernels)
