"""The coupled profile (ascend310p: Cube and Vector in one AI core): a convolution's residual add, clip and program
epilogue (SiLU) run on chip, L0C -> UB -> Vector -> GM (also with several images per block), instead of a second
Vector-core launch through GM as on ascend910b. A small 310P build checks the results against the reference, the
cost model against the emulator, and that the epilogue reads only the residual from GM."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, build_package

KERNELS = textwrap.dedent("""
    [[op]]
    label = "c.residual"
    type = "Conv"
    input = [2, 20, 9, 7]
    weight = [40, 20, 3, 3]
    pads = [1, 1, 1, 1]
    bias = true
    residual = true
    activation = "Relu"

    [[op]]
    label = "c.clip"
    type = "Conv"
    input = [1, 32, 14, 14]
    weight = [48, 32, 1, 1]
    bias = true
    activation = "Clip"
    min = 0.0
    max = 6.0

    [[op]]
    label = "c.residual_silu"
    type = "Conv"
    input = [1, 16, 6, 6]
    weight = [24, 16, 3, 3]
    pads = [1, 1, 1, 1]
    bias = true
    residual = true
    program = "sigmoid(0);mul(0,1)"

    [[op]]
    label = "c.residual_images"
    type = "Conv"
    input = [5, 40, 9, 9]
    weight = [24, 40, 1, 1]
    strides = [2, 2]
    bias = true
    residual = true
    activation = "Relu"
    tiling = {base_m = 32, base_n = 32, base_k1 = 1, c1_step = 1, images = 4}

    [[op]]
    label = "c.attention"
    type = "Attention"
    q = [1, 2, 40, 32]
    kv = 70
    scale = 0.25

    [[op]]
    label = "c.gemm"
    type = "Gemm"
    a = [20, 40]
    b = [40, 24]
    bias = true
""")

CHECK = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    sys.path[:0] = sys.argv[1].split(os.pathsep)
    import kiln
    from kiln import reference as ref
    from kiln.codegen.families.registry import predict
    from kiln.codegen.ir.profiles import PROFILES
    from test_kernels import check_dw_program, check_fp32_math, make_inputs, reference
    from test_costmodel import spec_of
    out = {}
    for k in kiln.kernels():
        args = make_inputs(k, seed=5)
        y = k(*args).astype(np.float64)
        st = k.last_stats
        row = {"variant": k.record["variant"], "blocks": st["blocks"], "record_blocks": k.record["blocks"],
               "mte2": st["pipes"]["MTE2"]["bytes"], "record_mte2": k.record["mte2_bytes"], "cycles": st["cycles"]}
        if k.record["features"]["kind"] == "conv2d" and k.spec.get("program"):  # + residual, then SiLU in fp32
            try:
                check_dw_program(k, args, y)
                row["within_bound"] = True
            except AssertionError:
                row["within_bound"] = False
        elif k.record["features"]["kind"] == "conv2d":
            want = reference(k, args)
            bound = ref.bound(want, reference(k, args, absolute=True), k.record["features"]["reduction_length"])
            if k.spec.get("residual"):
                bound = bound + 2.0 ** -11 * reference(k, args, absolute=True)
            row["within_bound"] = bool(np.all(np.abs(y - want) <= bound))
        if k.record["features"]["kind"] == "attention":
            try:
                check_fp32_math(k, args, y)
                row["within_bound"] = True
            except AssertionError:
                row["within_bound"] = False
        p = predict(spec_of(k), k.record["family"], k.tiling, PROFILES[st["profile"]])
        row["predicted"] = p.cycles
        row["pipes_equal"] = all((p.pipes[n].instrs, p.pipes[n].bytes) == (v["instructions"], v["bytes"])
                                 for n, v in st["pipes"].items())
        out[k.name] = row
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def coupled(tmp_path_factory):
    root = tmp_path_factory.mktemp("coupled")
    (root / "k.toml").write_text(KERNELS)
    pkg = build_package(root, f"KILN_KERNEL_LIST={root / 'k.toml'}", "KILN_TARGET=ascend310p")
    # the per-kind references and the spec decoder of two other test modules (tests/kernels, tests/codegen/cost)
    # and the source tree, which test_costmodel imports the codegen from
    tests_dirs = os.pathsep.join([str(REPO / "tests" / d) for d in ("kernels", "codegen/cost")] + [str(REPO)])
    r = subprocess.run([sys.executable, "-c", CHECK, tests_dirs], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(pkg)))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_epilogue_runs_on_chip_and_matches_the_reference(coupled):
    convs = {n: k for n, k in coupled.items() if n.startswith("conv2d")}
    assert len(convs) == 4  # c.residual_images: 4 images per block, each image's tile drained through UB
    for name, k in convs.items():
        assert re.search(r"\du1(\D|$)", k["variant"]), k["variant"]  # the on-chip epilogue variant (u1)
        assert k["within_bound"], name
        assert k["blocks"] == k["record_blocks"]  # one launch: no Vector-core pass
        assert k["mte2"] == k["record_mte2"]  # x, w, bias and the residual: the conv output is never read back


def test_cost_model_replays_the_coupled_kernels_exactly(coupled):
    for name, k in coupled.items():
        assert k["pipes_equal"], name
        assert k["predicted"] == pytest.approx(k["cycles"], rel=1e-9), name


def test_attention_keeps_scores_on_chip(coupled):
    """On a coupled core S and P.V drain L0C -> UB: GM is read for Q, K, V and the P tiles only."""
    (k,) = [k for n, k in coupled.items() if n.startswith("attention_flash")]
    assert k["variant"].endswith("u1"), k["variant"]
    assert k["within_bound"]
    assert k["mte2"] == k["record_mte2"]  # tiling.attention_mte2: no S or P.V workspace reads when on chip
