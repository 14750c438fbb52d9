"""Every instruction-set path the CPU supports computes the same kernels: a small kernel set is baked once
per ISA (KILN_ISA=avx512_bf16 / avx512 / avx2 / portable; amx_bf16 where the CPU has AMX) and run on the same inputs.
Paths with FMA accumulate each Cube product in the same order, so their results are bit-identical; the
portable path (no FMA: a multiply then an add) must stay within the fp32-accumulation error of the
reference. The thread count must not change results or simulated cycles."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import HOST_ISAS, build_package

KERNELS = textwrap.dedent("""
    [[op]]
    label = "isa.conv3x3"
    type = "Conv"
    input = [1, 24, 13, 11]
    weight = [40, 24, 3, 3]
    pads = [1, 1, 1, 1]
    bias = true
    activation = "Relu"

    [[op]]
    label = "isa.gemm"
    type = "Gemm"
    a = [37, 96]
    b = [96, 50]
    bias = true

    [[op]]
    label = "isa.dwconv"
    type = "Conv"
    input = [1, 32, 15, 15]
    weight = [32, 1, 3, 3]
    group = 32
    pads = [1, 1, 1, 1]
    bias = true
    activation = "Clip"
    min = 0.0
    max = 6.0

    [[op]]
    label = "isa.softmax"
    type = "Softmax"
    shape = [6, 200]

    [[op]]
    label = "isa.add_relu"
    type = "Add"
    shape = [5, 333]
    activation = "Relu"
""")

RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    import kiln
    if len(sys.argv) > 2:
        kiln.set_num_threads(int(sys.argv[2]))
    out = {"isa": kiln.build_info()["isa"], "kernels": {}}
    for k in kiln.kernels():
        rng = np.random.default_rng(11)
        ins = []
        for t in k.record["inputs"]:
            a = rng.standard_normal(t["shape"]).astype(np.float32)
            ins.append(a.astype(np.float16) if t["dtype"] == "fp16" else a)
        y = k.run_packed(*ins)
        np.save(f"{sys.argv[1]}/{k.name}.npy", y)
        out["kernels"][k.name] = k.last_stats["cycles"]
    print(json.dumps(out))
""")


ISAS = HOST_ISAS


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("isa")
    kl = root / "kernels.toml"
    kl.write_text(KERNELS)
    out = {}
    for isa, supported in ISAS:
        if not supported:
            continue
        pkg_root = build_package(root / isa, f"KILN_KERNEL_LIST={kl}", f"KILN_ISA={isa}")
        for threads in ("1", "2"):
            dest = root / f"out_{isa}_{threads}"
            dest.mkdir()
            env = dict(os.environ, PYTHONPATH=str(pkg_root))
            p = subprocess.run([sys.executable, "-c", RUN, str(dest), threads], capture_output=True, text=True,
                               env=env)
            assert p.returncode == 0, p.stderr
            info = json.loads(p.stdout)
            assert info["isa"] == isa
            out[(isa, threads)] = (dest, info["kernels"])
    return out


@pytest.mark.parametrize("isa", [i for i, _ in ISAS])
def test_isa_path_matches_the_fma_reference_path(results, isa):
    if not dict(ISAS)[isa]:
        pytest.skip(f"this CPU lacks {isa} (flags in /proc/cpuinfo)")
    base = "avx512" if ("avx512", "2") in results else "avx2" if ("avx2", "2") in results else "portable"
    ref_dir, ref_cycles = results[(base, "2")]
    got_dir, cycles = results[(isa, "2")]
    assert cycles == ref_cycles  # simulated cycles do not depend on the host ISA
    for name in ref_cycles:
        a, b = np.load(ref_dir / f"{name}.npy"), np.load(got_dir / f"{name}.npy")
        cube = name.startswith(("conv2d_cube", "gemm_cube"))
        if isa == "portable" and cube and base != "portable":
            # no FMA: each product is rounded once more before the add; within a few fp16 ulps
            diff = np.abs(a.astype(np.float32) - b.astype(np.float32))
            assert np.all(diff <= 2 * np.spacing(np.abs(a.astype(np.float32))) + 1e-6), name
        else:
            np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16), err_msg=name)


def test_thread_count_changes_neither_results_nor_cycles(results):
    for (isa, threads), (d, cycles) in results.items():
        if threads != "1":
            continue
        d2, cycles2 = results[(isa, "2")]
        assert cycles == cycles2
        for name in cycles:
            np.testing.assert_array_equal(np.load(d / f"{name}.npy").view(np.uint16),
                                          np.load(d2 / f"{name}.npy").view(np.uint16), err_msg=name)
