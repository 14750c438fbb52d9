"""The codegen stages on their own: options, the kernel-list frontend, opspec
dedup and naming, tiling against both profiles, rendering and atomic writes."""
import json
from pathlib import Path

import pytest
from conftest import REPO

from codegen import KilnError
from codegen import __main__ as cli
from codegen.emit.render import output_files, render, write_outputs
from codegen.frontend.kernel_list import load_kernel_list
from codegen.ir.opspec import Conv2dSpec, GemmSpec
from codegen.ir.optlog import REASONS, OptLog
from codegen.ir.profiles import PROFILES
from codegen.options import OPTIONS, OptionError, parse_options
from codegen.pipeline import plan
from codegen.select.tiling import choose_variant, mte2_bytes

SOURCE = REPO


@pytest.mark.parametrize("name,value,expect", [
    ("MAX_FUSION_DEPTH", "abc", "MAX_FUSION_DEPTH='abc' is not valid: expected an integer 1..8"),
    ("MAX_FUSION_DEPTH", "9", "out of range"),
    ("USE_WINOGRAD", "MAYBE", "USE_WINOGRAD='MAYBE' is not valid: expected one of ON, OFF, AUTO, F2, F4"),
    ("KILN_TARGET", "ascend999", "expected one of ascend910b, ascend310p"),
    ("ENABLE_FUSION", "perhaps", "expected ON or OFF"),
    ("KILN_SHAPE_BUCKETS", "224;x", "entry 'x'"),
    ("KILN_OPT_LEVEL", "O4", "one of O0, O1, O2, O3"),
])
def test_bad_option_values_name_option_and_allowed(name, value, expect):
    with pytest.raises(OptionError, match=expect.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        parse_options({name: value})


def test_options_defaults_and_normalisation():
    o = parse_options({"USE_WINOGRAD": "off", "KILN_SHAPE_BUCKETS": "384;224;224", "ENABLE_FUSION": "0"})
    assert o.use_winograd == "OFF" and o.kiln_shape_buckets == (224, 384) and o.enable_fusion is False
    assert parse_options({}).max_fusion_depth == 5
    with pytest.raises(OptionError, match="unknown option"):
        parse_options({"ENABLE_FUSON": "ON"})
    assert {o.name for o in OPTIONS} >= {"ENABLE_FUSION", "MAX_FUSION_DEPTH", "USE_WINOGRAD", "FORCE_DIRECT_CONV",
                                         "DEBUG_OPTIMIZATION_PATH", "KILN_MODELS", "KILN_TARGET",
                                         "KILN_SHAPE_BUCKETS", "KILN_OPT_LEVEL", "USE_FLASH_ATTENTION", "MAX_SEQ_LEN"}


def write(tmp_path, text) -> Path:
    p = tmp_path / "kernels.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("body,expect", [
    ('type = "Hardmax"\nshape = [4, 4]', r"'bad'.*unsupported op type 'Hardmax'.*Supported: Conv"),
    ('type = "Conv"\ninput = [1, 32, 8, 8]\nweight = [64, 8, 3, 3]\ngroup = 3',
     r"'bad'.*group=3 expects 24 input channels"),
    ('type = "Conv"\ninput = [1, 16, 8, 8]\nweight = [16, 8, 3, 3]', r"'bad'.*expects 8 input channels"),
    ('type = "Gemm"\na = [4, 8]\nb = [9, 4]', r"'bad'.*inner dimensions differ"),
    ('type = "Conv"\ninput = [1, 16, 2, 2]\nweight = [16, 16, 5, 5]', r"'bad'.*kernel larger than the padded input"),
    ('type = "Relu"\nshape = [4]\nactivation = "Gelu"', r"'bad'.*activation 'Gelu' not supported"),
    ('type = "Relu"\nshape = [4]\nstride = [2, 2]', r"'bad'.*unknown field"),
])
def test_kernel_list_errors_name_the_entry(tmp_path, body, expect):
    p = write(tmp_path, f'[[op]]\nlabel = "bad"\n{body}\n')
    with pytest.raises(KilnError, match=expect):
        load_kernel_list(p)


def test_kernel_list_file_errors(tmp_path):
    with pytest.raises(KilnError, match="cannot read kernel list"):
        load_kernel_list(tmp_path / "missing.toml")
    with pytest.raises(KilnError, match="not valid TOML"):
        load_kernel_list(write(tmp_path, "[[op]\n"))


def test_identical_specs_dedup_and_depthwise_lowering(tmp_path):
    conv = 'type = "Conv"\ninput = [1, 16, 8, 8]\nweight = [16, 16, 3, 3]\npads = [1, 1, 1, 1]\n'
    dw = 'type = "Conv"\ninput = [1, 16, 8, 8]\nweight = [16, 1, 3, 3]\ngroup = 16\n'
    p = write(tmp_path, f'[[op]]\nlabel="a"\n{conv}\n[[op]]\nlabel="b"\n{conv}\n[[op]]\nlabel="c"\n{dw}')
    opts = parse_options({"KILN_KERNEL_LIST": str(p), "DEBUG_OPTIMIZATION_PATH": "ON", "KILN_MODELS": ""})
    pl = plan(opts, SOURCE)
    assert [k.instances for k in pl.kernels] == [["a", "b"], ["c"]]
    assert [k.variant.family for k in pl.kernels] == ["conv2d_cube_img2col", "dwconv2d_vector"]
    assert any(line.startswith("[OPT] opspec b conv2d_1x16x8x8_o16_k3x3_s1_p1 reason=dedup") for line in pl.log.lines)
    for line in pl.log.lines:  # every line parses and names a catalogued reason
        assert line.startswith("[OPT] ") and line.split("reason=")[1].split()[0] in REASONS


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_default_variants_fit_every_profile(profile, default_plan):
    pl = default_plan(profile)  # kernel list and the default zoo models
    prof = PROFILES[profile]
    for k in pl.kernels:
        for pos, used in k.variant.buffers.items():
            assert used <= prof.capacity[pos], (k.symbol, pos)
        if k.spec.kind == "channel_gather":  # a copy reads the channels it moves, not the inputs' padding or rest
            assert k.mte2_bytes == k.spec.output().nbytes * k.spec.out_channels // (k.spec.output().shape[1] * 16)
            continue
        if k.spec.kind == "gather":  # an embedding reads the rows its indices name, not the whole table
            assert k.mte2_bytes >= k.spec.output().nbytes + k.spec.inputs()[1].nbytes, k.symbol
            continue
        if k.spec.kind == "col2im":  # every column row that lands in the output (the pads crop the others)
            s = k.spec
            landed = {(a, ih) for oh in range(s.ho) for a, ih in s.row_taps(oh)}
            assert k.mte2_bytes >= len(landed) * s.kw * s.w * 32 * s.n * -(-s.c // 16), k.symbol
            continue
        # every input read at least once; a grouped conv's block-diagonal weight only where its groups' rows are
        inputs = [t for t in k.spec.inputs() if not (getattr(k.spec, "group", 1) > 1 and t.name == "w")]
        assert k.mte2_bytes >= sum(t.nbytes for t in inputs), k.symbol


def test_tiling_error_names_kernel_and_buffer():
    wide = Conv2dSpec(1, 16, 4, 20000, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, False, False)
    with pytest.raises(KilnError, match=r"\[tiling\] conv2d_1x16x4x20000.*L1"):
        choose_variant(wide, PROFILES["ascend910b"], OptLog())


def test_gemm_traffic_formula_counts_reloads():
    spec = GemmSpec(256, 64, 512, False, False)
    v = choose_variant(spec, PROFILES["ascend910b"], OptLog())
    m_tiles = -(-256 // v.params["base_m"])
    n_tiles = -(-512 // v.params["base_n"])
    # A is read once per N tile, B once per M tile.
    assert mte2_bytes(spec, v) == 256 * 64 * 2 * n_tiles + 64 * 512 * 2 * m_tiles


def test_render_and_atomic_write(tmp_path, search_cache):
    pl = plan(parse_options({"DEBUG_OPTIMIZATION_PATH": "ON", "KILN_MODELS": ""}), SOURCE,
              search_cache_dir=search_cache)
    files = render(pl)
    assert sorted(files) == sorted(output_files(pl))
    out = tmp_path / "gen"
    assert len(write_outputs(files, out)) == len(files)
    assert write_outputs(files, out) == []  # unchanged content is not rewritten
    man = json.loads((out / "manifest.json").read_text())
    assert len(man["kernels"]) == len(pl.kernels)
    assert not list(out.rglob("*.tmp"))


def test_failed_generation_keeps_previous_outputs(tmp_path, monkeypatch):
    opts = tmp_path / "opts.json"
    opts.write_text(json.dumps({"KILN_MODELS": ""}))
    out, stamp = tmp_path / "gen", tmp_path / "stamp"
    assert cli.main(["generate", str(opts), str(out), "--stamp", str(stamp)]) == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # A broken template: generation must fail naming the kernel and stage, and write nothing.
    broken = tmp_path / "templates"
    broken.mkdir()
    for t in (SOURCE / "templates").glob("*.j2"):
        (broken / t.name).write_text(t.read_text())
    (broken / "gemm_cube.cpp.j2").write_text("{{ no_such_variable }}")
    from codegen.emit import render as render_mod
    monkeypatch.setattr(render_mod, "TEMPLATE_DIR", broken)
    assert cli.main(["generate", str(opts), str(out), "--stamp", str(stamp)]) == 1
    assert not stamp.exists()
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.parametrize("m", [1, 7, 16, 35, 48, 100, 200, 1000])
@pytest.mark.parametrize("n", [6, 24, 48, 100, 1000])
def test_tiles_are_fractal_multiples(m, n):
    for spec in (GemmSpec(m, 40, n, True, False),
                 Conv2dSpec(1, 5, max(1, m // 7), 7, n, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, False, False)):
        v = choose_variant(spec, PROFILES["ascend910b"], OptLog())
        assert v.params["base_m"] % 16 == 0 and v.params["base_n"] % 16 == 0, v.params


def test_build_time_packers_match_runtime_layouts():
    import numpy as np

    from codegen.ir import layouts
    from kiln import _core
    rng = np.random.default_rng(0)
    w = rng.standard_normal((20, 35, 3, 2)).astype(np.float32)
    np.testing.assert_array_equal(layouts.oihw_to_fractal_z(w).view(np.uint16), _core.oihw_to_fractal_z(w))
    b = rng.standard_normal((50, 33)).astype(np.float32)
    np.testing.assert_array_equal(layouts.kn_to_zn(b).view(np.uint16), _core.kn_to_zn(b))
    d = rng.standard_normal((40, 1, 5, 5)).astype(np.float32)
    np.testing.assert_array_equal(layouts.dw_weight_to_c1hwc0(d).view(np.uint16), _core.dw_weight_to_c1hwc0(d))
    x = rng.standard_normal((2, 30, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(layouts.nchw_to_nc1hwc0(x).view(np.uint16), _core.nchw_to_nc1hwc0(x))
    back = _core.nc1hwc0_to_nchw(_core.nchw_to_nc1hwc0(x), 30).view(np.float16)
    np.testing.assert_array_equal(back, x.astype(np.float16))


def test_model_entries_with_a_batch(tmp_path):
    from codegen import KilnError
    from codegen.pipeline import check_model_entries, model_onnx
    with pytest.raises(KilnError, match="batch after '@' must be an integer"):  # the grammar: tests/codegen/frontend
        check_model_entries(parse_options({"KILN_MODELS": "resnet50@x"}).kiln_models)
    assert parse_options({"KILN_MODELS": "resnet50@32;mobilenet_v2"}).kiln_models == ("resnet50@32", "mobilenet_v2")
    name, path, spec = model_onnx("mobilenet_v2@4", tmp_path)
    assert (name, spec.batch) == ("mobilenet_v2_b4", 4) and path.is_file()
    one_relu = write(tmp_path, '[[op]]\ntype = "Relu"\nshape = [16]\n')
    p = plan(parse_options({"KILN_MODELS": "mobilenet_v2@2", "KILN_KERNEL_LIST": str(one_relu)}), SOURCE, tmp_path)
    (m,) = p.models
    assert m.name == "mobilenet_v2_b2" and m.lowered.graph_inputs[0][1] == (2, 3, 224, 224)
    assert any(k.spec.kind == "conv2d" and k.spec.n == 2 for k in p.kernels)


def test_vector_passes_give_each_core_at_most_one_tile(default_plan):
    from math import ceil
    prof = PROFILES["ascend910b"]
    p = default_plan("ascend910b")  # the default options' plan
    checked = 0
    for k in p.kernels:
        tile = k.variant.params.get("tile_elems") or k.variant.params.get("epi_tile")
        if not tile:
            continue
        numel = k.spec.numel if k.spec.kind == "eltwise" else k.spec.output().nbytes // 2
        ub_cap = tile >= (prof.capacity["UB"] // 24) // 128 * 128  # the UB budget bounds the tile instead
        assert ceil(numel / tile) <= prof.cores_for("vector") or ub_cap, (k.symbol, numel, tile)
        checked += 1
    assert checked > 5


def test_a_generated_file_the_disk_refuses_is_named_not_a_traceback(tmp_path, monkeypatch, capsys):
    opts = tmp_path / "opts.json"
    opts.write_text(json.dumps({"KILN_MODELS": ""}))
    out, stamp = tmp_path / "gen", tmp_path / "stamp"
    import os

    real_replace = os.replace

    def disk_full(src, dst):  # the disk fills up at the manifest; the search cache went in before
        if str(dst).endswith("manifest.json"):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)
    monkeypatch.setattr(os, "replace", disk_full)
    assert cli.main(["generate", str(opts), str(out), "--stamp", str(stamp)]) == 1
    said = capsys.readouterr().err
    assert "kiln codegen: " in said and "cannot write it (No space left on device); nothing was written" in said
    assert not stamp.exists() and not list(tmp_path.rglob("*.tmp"))
