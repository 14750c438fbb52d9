"""Winograd convolution: the algorithm choice under USE_WINOGRAD / FORCE_DIRECT_CONV (planned in process,
nothing compiled), and the F(2,3) and F(4,3) kernels themselves, baked in two small builds
(USE_WINOGRAD=F2 and F4) and checked in a subprocess against a float64 reference within the error bound
of docs/winograd-numerics.md, and against the cost model's per-pipe counts and cycles."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, build_package

from codegen.options import parse_options
from codegen.pipeline import plan
from codegen.select.tiling import algorithm_of


def conv(label, n, cin, h, w, cout, pads=(1, 1, 1, 1), strides=(1, 1), k=3, residual=False, act="Relu"):
    return textwrap.dedent(f"""
        [[op]]
        label = "{label}"
        type = "Conv"
        input = [{n}, {cin}, {h}, {w}]
        weight = [{cout}, {cin}, {k}, {k}]
        strides = [{strides[0]}, {strides[1]}]
        pads = [{", ".join(map(str, pads))}]
        bias = true
        residual = {str(residual).lower()}
        activation = "{act}"
    """)


# Odd sizes, padding 0 / 1 / asymmetric, channels not multiples of 16, a residual, a clip, and a 19x19 map.
KERNELS = "".join([
    conv("w.odd", 2, 20, 9, 7, 5, pads=(0, 1, 1, 0), residual=True),
    conv("w.pad0", 1, 16, 11, 13, 24, pads=(0, 0, 0, 0), act="Clip"),
    conv("w.c3", 1, 3, 12, 12, 8),
    conv("w.map19", 1, 64, 19, 19, 64),
    conv("w.stride2", 1, 16, 8, 8, 16, strides=(2, 2)),  # not legal: stays direct
])


def kernel_list(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "kernels.toml"
    p.write_text(text.replace('activation = "Clip"', 'activation = "Clip"\nmin = 0.0\nmax = 6.0'))
    return p


def planned(tmp_path, text=KERNELS, **opts):
    raw = {"KILN_MODELS": "", "KILN_KERNEL_LIST": str(kernel_list(tmp_path, text)), "DEBUG_OPTIMIZATION_PATH": "ON"}
    raw.update(opts)
    p = plan(parse_options(raw), REPO)
    return {k.instances[0]: k for k in p.kernels}, p.log.lines


def test_off_and_force_direct_bake_direct_convolution(tmp_path):
    for opts in ({"USE_WINOGRAD": "OFF"}, {"USE_WINOGRAD": "ON", "FORCE_DIRECT_CONV": "ON"}):
        ks, log = planned(tmp_path, **opts)
        # no Winograd tile (the Cube's direct convolution, or the Vector's where the search finds it faster)
        assert {algorithm_of(k.variant) for k in ks.values()} <= {"direct_img2col", "vector_direct"}
        assert any("algorithm" in line and "reason=option" in line for line in log)


def test_on_bakes_winograd_wherever_legal(tmp_path):
    ks, log = planned(tmp_path, USE_WINOGRAD="ON")
    for label, k in ks.items():
        algo = algorithm_of(k.variant)
        if label == "w.stride2":
            assert algo == "direct_img2col"
            assert any("w.stride2" not in line and "winograd_illegal" in line and "stride_2x2" in line
                       for line in log)
        else:
            assert algo.startswith("winograd_f"), (label, algo)
            # the log says which tile and the cycles behind it
            line = next(x for x in log if f"algorithm {k.spec.name} {algo} reason=option" in x)
            assert "winograd_f2_cycles=" in line and "USE_WINOGRAD=ON" in line


def test_auto_keeps_the_variant_with_the_fewest_predicted_cycles(tmp_path):
    ks, log = planned(tmp_path, USE_WINOGRAD="AUTO")
    for label, k in ks.items():
        if label == "w.stride2":
            continue
        compared = k.variant.notes["compared_cycles"]
        assert algorithm_of(k.variant) == min(compared, key=lambda a: (compared[a], a))
        assert set(compared) >= {"direct_img2col", "winograd_f2"}
    spec = ks["w.map19"].spec.name
    line = next(x for x in log if x.startswith(f"[OPT] algorithm {spec} ") and "reason=cost_model" in x)
    for field in ("direct_img2col_cycles=", "winograd_f2_cycles=", "winograd_f4_cycles=", "waste_f2=0.0975",
                  "waste_f4=0.0975"):
        assert field in line, line


def test_error_bound_rejects_a_tile_past_the_tolerance(tmp_path, monkeypatch):
    from codegen.families import conv2d_algorithm
    monkeypatch.setattr(conv2d_algorithm, "WINOGRAD_MAX_ERROR", 1e-9)
    ks, log = planned(tmp_path, USE_WINOGRAD="ON")
    assert {algorithm_of(k.variant) for k in ks.values()} == {"direct_img2col"}
    assert any("winograd_f4:rejected reason=winograd_error_bound" in line for line in log)


# ---------------------------------------------------------------- the kernels, compiled

CHECK = textwrap.dedent("""
    import json, sys
    import numpy as np
    import kiln
    from kiln import reference as ref
    from kiln.codegen.ir import winograd
    from kiln.codegen.families.registry import predict
    from kiln.codegen.ir.opspec import Conv2dSpec
    from kiln.codegen.ir.profiles import PROFILES
    rng = np.random.default_rng(7)
    out = []
    for k in kiln.kernels():
        s, rec = k.spec, k.record
        x = rng.standard_normal((s["n"], s["cin"], s["h"], s["w"]))
        w = rng.standard_normal((s["cout"], s["cin"], 3 if s["kh"] == 3 else s["kh"], s["kw"])) / np.sqrt(9 * s["cin"])
        b = rng.standard_normal(s["cout"])
        ho, wo = rec["output"]["shape"][2:4]
        args = [x, w, b]
        r = rng.standard_normal((s["n"], s["cout"], ho, wo)) if s.get("residual") else None
        if r is not None:
            args.append(r)
        y = k(*args).astype(np.float64)
        pads = (s["pt"], s["pl"], s["pb"], s["pr"])
        want = ref.conv2d_nchw(ref.f16(x), ref.f16(w), b.astype(np.float32), (s["sh"], s["sw"]), pads)
        if r is not None:
            want = want + ref.f16(r)
        if s.get("clip_hi"):
            want = np.clip(want, 0, s["clip_hi"])
        elif s["relu"]:
            want = np.maximum(want, 0)
        st = k.last_stats
        spec = Conv2dSpec(**s)
        p = predict(spec, rec["family"], rec["tiling"], PROFILES[st["profile"]])
        out.append({
            "name": k.name, "algorithm": rec["algorithm"], "tile": rec["tiling"].get("tile"),
            "rel_err": float(np.abs(y - want).max() / np.abs(want).max()),
            "bound": winograd.error_bound(rec["tiling"]["tile"], s["cin"] * 9) if rec["tiling"].get("tile") else None,
            "nonzero": float(np.count_nonzero(y) / y.size),
            "cycles": st["cycles"], "predicted": p.cycles, "manifest_predicted": rec["predicted_cycles"],
            "pipes": {n: [v["instructions"], v["bytes"]] for n, v in st["pipes"].items()},
            "predicted_pipes": {n: [c.instrs, c.bytes] for n, c in p.pipes.items()},
        })
    print(json.dumps(out))
""")


# The 19x19 conv pinned to direct convolution, so each build also runs the variant Winograd competes with.
MAP19_DIRECT = conv("w.map19.direct", 1, 64, 19, 19, 64).replace('activation = "Relu"',
                                                                    'activation = "Relu"\nalgorithm = "direct_img2col"')


@pytest.fixture(scope="module", params=["F2", "F4"])
def winograd_build(request, tmp_path_factory):
    """A build baking KERNELS with one forced Winograd tile, and the results of running each kernel."""
    root = tmp_path_factory.mktemp(f"winograd_{request.param}")
    kl = kernel_list(root, KERNELS + MAP19_DIRECT)
    pkg_root = build_package(root, f"KILN_KERNEL_LIST={kl}", f"USE_WINOGRAD={request.param}")
    env = dict(os.environ, PYTHONPATH=str(pkg_root))
    r = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    results = {k["name"]: k for k in json.loads(r.stdout)}
    SIMULATED[request.param] = results
    return request.param, results


SIMULATED: dict[str, dict] = {}  # build mode -> kernel results, filled by the fixture


def test_forced_tile_is_baked_where_legal(winograd_build):
    mode, ks = winograd_build
    for name, k in ks.items():
        direct = "_s2_" in name or "_s2x2" in name or name.startswith("conv2d_cube_img2col_1x64x19x19")
        assert k["algorithm"] == ("direct_img2col" if direct else f"winograd_{mode.lower()}"), name


def test_winograd_kernels_match_the_reference_within_the_error_bound(winograd_build):
    _, ks = winograd_build
    checked = 0
    for name, k in ks.items():
        if k["tile"] is None:
            continue
        assert k["rel_err"] <= k["bound"], (name, k["rel_err"], k["bound"])
        assert k["nonzero"] > 0.3, name  # the check can fail: outputs are not all zero
        checked += 1
    assert checked == 4


def test_cost_model_replays_the_emulator_exactly(winograd_build):
    """Instruction and byte counts per pipe are equal; cycles equal (same timing rules)."""
    _, ks = winograd_build
    for name, k in ks.items():
        for pipe, (instrs, nbytes) in k["pipes"].items():
            assert [instrs, nbytes] == k["predicted_pipes"][pipe], (name, pipe)
        assert k["predicted"] == pytest.approx(k["cycles"], rel=1e-9), name
        assert k["manifest_predicted"] == pytest.approx(k["cycles"], abs=1e-3), name


def test_auto_on_the_19x19_map_picks_the_variant_with_the_fewest_simulated_cycles(tmp_path, winograd_build):
    """Simulated (emulator) cycles of direct, F(2,3) and F(4,3) for the 19x19 conv, from the two builds; the
    choice AUTO plans must be the fastest of them (it comes from the cost model, not from a rule about 19)."""
    if len(SIMULATED) < 2:
        pytest.skip("runs after both builds")
    cycles = {}
    for _mode, ks in SIMULATED.items():
        for name, k in ks.items():
            if "1x64x19x19" in name:
                cycles[k["algorithm"]] = k["cycles"]
    assert set(cycles) == {"direct_img2col", "winograd_f2", "winograd_f4"}
    ks, _log = planned(tmp_path, USE_WINOGRAD="AUTO")
    assert algorithm_of(ks["w.map19"].variant) == min(cycles, key=cycles.get), cycles
