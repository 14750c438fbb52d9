"""KILN_DTYPE=bf16: the Cube kernels take bf16 operands (weights packed as bf16 at build time, activations
rounded to bf16 where they enter the Cube), fp32 accumulate, fp16 out.

Kernels: a small bf16 kernel set is baked once per instruction-set path the CPU has and compared with a NumPy
reference on the same operands rounded to bf16 (exact products, the fp32-accumulation error bound of
kiln.reference over the reduction length). The paths without AVX512_BF16 widen bf16 exactly and add one FMA
per k in k order (avx2 and avx512 bit-identical); avx512_bf16 uses vdpbf16ps (two k per instruction, its own
order within a pair), which stays inside the same bound. A tiny CNN (two-source and chained convolutions, a
GEMM) baked with KILN_DTYPE=bf16 is validated against ONNX Runtime within the bf16 model tolerance below."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import HOST_ISAS, REPO, build_package, minimal_kernel_list

from codegen.emit.opspec_file import render_opspec, spec_hash
from codegen.options import OptionError, parse_options
from codegen.pipeline import plan

KERNELS = textwrap.dedent("""
    [[op]]
    label = "bf16.gemm"
    type = "Gemm"
    a = [37, 200]
    b = [200, 50]
    bias = true
    activation = "Relu"

    [[op]]
    label = "bf16.conv3x3"
    type = "Conv"
    input = [1, 24, 13, 11]
    weight = [40, 24, 3, 3]
    pads = [1, 1, 1, 1]
    bias = true

    [[op]]
    label = "bf16.conv_s2"
    type = "Conv"
    input = [1, 5, 9, 7]
    weight = [6, 5, 3, 3]
    strides = [2, 1]
    pads = [1, 1, 1, 1]

    [[op]]
    label = "bf16.bgemm_bt"
    type = "BatchedMatMul"
    a = [2, 40, 72]
    b = [2, 24, 72]
    trans_b = true
""")

# Runs in a subprocess against one build: each kernel against its bf16 reference; prints the kernel names,
# their largest error relative to the bound, and saves the outputs for the cross-path comparison.
RUN = textwrap.dedent("""
    import json, sys
    import numpy as np
    import kiln
    from kiln import reference as ref
    from kiln.codegen.ir.layouts import bf16_bits_to_f32, f32_to_bf16_bits
    assert kiln.build_info()["dtype"] == "bf16"

    def bf16(a):  # the value the Cube multiplies: fp32 -> bf16 (weights), fp16 -> bf16 (activations)
        return bf16_bits_to_f32(f32_to_bf16_bits(np.asarray(a, np.float32))).astype(np.float64)

    out = {"isa": kiln.build_info()["isa"], "worst": {}}
    rng = np.random.default_rng(5)
    for k in kiln.kernels():
        s, kind = k.spec, k.record["features"]["kind"]
        assert k.name.endswith("_bf16") and s["dtype"] == "bf16", k.name
        if kind == "gemm":
            a = rng.standard_normal((s["m"], s["k"])).astype(np.float32)
            b = (rng.standard_normal((s["k"], s["n"])) / np.sqrt(s["k"])).astype(np.float32)
            bias = rng.standard_normal(s["n"]).astype(np.float32)
            y = k(a, b, bias)
            qa, qb = bf16(a.astype(np.float16)), bf16(b)
            want = ref.gemm(qa, qb, bias, relu=s["relu"])
            bound = ref.bound(want, ref.gemm(np.abs(qa), np.abs(qb), np.abs(bias)), s["k"])
        elif kind == "conv2d":
            x = rng.standard_normal((s["n"], s["cin"], s["h"], s["w"])).astype(np.float32)
            w = (rng.standard_normal((s["cout"], s["cin"], s["kh"], s["kw"])) / 8).astype(np.float32)
            bias = rng.standard_normal(s["cout"]).astype(np.float32) if s["bias"] else None
            y = k(x, w, *([bias] if s["bias"] else []))
            qx, qw = bf16(x.astype(np.float16)), bf16(w)
            geo = ((s["sh"], s["sw"]), (s["pt"], s["pl"], s["pb"], s["pr"]), (s["dh"], s["dw"]))
            want = ref.conv2d_nchw(qx, qw, bias, *geo, relu=s["relu"])
            absb = None if bias is None else np.abs(bias)
            bound = ref.bound(want, ref.conv2d_nchw(np.abs(qx), np.abs(qw), absb, *geo), s["cin"] * s["kh"] * s["kw"])
        else:  # bgemm: both operands are activations (fp16 in GM)
            a, b = (rng.standard_normal(t["shape"]).astype(np.float16) for t in k.record["inputs"])
            y = k(a, b)
            qa, qb = bf16(a), bf16(b)
            if s["trans_b"]:
                qb = qb.transpose(0, 2, 1)
            want, absw = qa @ qb, np.abs(qa) @ np.abs(qb)
            bound = ref.bound(want, absw, s["k"])
        err = np.abs(y.astype(np.float64) - want)
        assert np.all(err <= bound), (k.name, float((err / bound).max()))
        out["worst"][k.name] = float((err / bound).max())
        np.save(f"{sys.argv[1]}/{k.name}.npy", y)
    print(json.dumps(out))
""")


ISAS = HOST_ISAS


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("bf16")
    kl = root / "kernels.toml"
    kl.write_text(KERNELS)
    out = {}
    for isa, supported in ISAS:
        if not supported:
            continue
        pkg = build_package(root / isa, f"KILN_KERNEL_LIST={kl}", f"KILN_ISA={isa}", "KILN_DTYPE=bf16")
        dest = root / f"out_{isa}"
        dest.mkdir()
        r = subprocess.run([sys.executable, "-c", RUN, str(dest)], capture_output=True, text=True,
                           env=dict(os.environ, PYTHONPATH=str(pkg)))
        assert r.returncode == 0, r.stdout + r.stderr
        info = json.loads(r.stdout.strip().splitlines()[-1])
        assert info["isa"] == isa
        out[isa] = (dest, info["worst"])
    return out


@pytest.mark.parametrize("isa", [i for i, _ in ISAS])
def test_bf16_kernels_match_the_bf16_reference(results, isa):
    if not dict(ISAS)[isa]:
        pytest.skip(f"this CPU lacks {isa} (flags in /proc/cpuinfo)")
    _, worst = results[isa]
    assert len(worst) == 4  # every kernel checked (the subprocess asserts the bound per element)
    print(isa, {k: round(v, 3) for k, v in worst.items()})


def test_fma_paths_are_bit_identical_and_vdpbf16ps_stays_close(results):
    if "avx512" not in results:
        pytest.skip("this CPU lacks avx512")
    base, _ = results["avx512"]
    for isa in ("avx2", "avx512_bf16", "amx_bf16"):
        if isa not in results:
            continue
        d, _ = results[isa]
        for f in base.glob("*.npy"):
            a, b = np.load(f), np.load(d / f.name)
            if isa == "avx2":  # the same FMAs in the same k order
                np.testing.assert_array_equal(a, b, err_msg=f"{isa} {f.stem}")
            else:  # vdpbf16ps: each pair of k in its own order; both within the reference bound (above)
                rel = np.abs(a.astype(np.float64) - b) / (np.abs(a.astype(np.float64)).max() + 1e-30)
                assert rel.max() <= 2 ** -9, (isa, f.stem, rel.max())


def test_invalid_dtype_names_the_option_and_the_values():
    with pytest.raises(OptionError) as e:
        parse_options({"KILN_DTYPE": "fp8"})
    assert "KILN_DTYPE='fp8' is not valid: expected one of fp16, bf16" in str(e.value)
    assert parse_options({"KILN_DTYPE": "BF16"}).kiln_dtype == "bf16"
    assert parse_options({}).kiln_dtype == "fp16"


# ---- a tiny CNN baked with KILN_DTYPE=bf16, against ONNX Runtime ---------------------------------------------
# Tolerance of a bf16 build against fp32 ONNX Runtime (docs/numerics.md): every output's cosine >= 0.999 and its largest
# error <= 1% of the output's largest magnitude (bf16 keeps 8 significant bits, half an ulp = 2^-9 = 0.2% per
# operand, growing over the layers; the fp16 build's figure is about 8x smaller).
BF16_COSINE, BF16_MAX_REL = 0.999, 0.01


def tiny_cnn(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(2)
    inits, nodes = [], []

    def w(name, shape, scale=None):
        fan = int(np.prod(shape[1:]))
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan)).astype(np.float32), name))
        return name

    def b(name, n):
        inits.append(numpy_helper.from_array((0.1 * rng.standard_normal(n)).astype(np.float32), name))
        return name

    # two sources: relu(conv3x3(x) + conv1x1(x)), the 1x1 accumulated into the 3x3's L0C
    nodes.append(helper.make_node("Conv", ["x", w("w1", (32, 16, 3, 3)), b("b1", 32)], ["c1"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Conv", ["x", w("wd", (32, 16, 1, 1)), b("bd", 32)], ["cd"]))
    nodes.append(helper.make_node("Add", ["c1", "cd"], ["s1"]))
    nodes.append(helper.make_node("Relu", ["s1"], ["a1"]))
    # a chain: conv1x1(relu(conv3x3(a1))), the 3x3 result kept in L1
    nodes.append(helper.make_node("Conv", ["a1", w("w2", (32, 32, 3, 3)), b("b2", 32)], ["c2"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c2"], ["a2"]))
    nodes.append(helper.make_node("Conv", ["a2", w("w3", (48, 32, 1, 1)), b("b3", 48)], ["c3"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["c3"], ["g"]))
    nodes.append(helper.make_node("Flatten", ["g"], ["f"]))
    nodes.append(helper.make_node("Gemm", ["f", w("wf", (10, 48)), b("bf", 10)], ["y"], transB=1))
    g = helper.make_graph(nodes, "tiny_bf16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 64, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_bf16_plan_names_hashes_weights_and_winograd(tmp_path):
    """The codegen alone (no compile): the same model planned fp16 and bf16."""
    model = tiny_cnn(tmp_path / "tiny_bf16.onnx")
    (tmp_path / "k.toml").write_text('[[op]]\nlabel = "k"\ntype = "Conv"\ninput = [1, 32, 14, 14]\n'
                                     'weight = [32, 32, 3, 3]\npads = [1, 1, 1, 1]\n')  # Winograd-legal
    plans = {dt: plan(parse_options({"KILN_MODELS": str(model), "KILN_KERNEL_LIST": str(tmp_path / "k.toml"),
                                     "KILN_DTYPE": dt, "DEBUG_OPTIMIZATION_PATH": "ON"}), REPO, tmp_path)
             for dt in ("fp16", "bf16")}
    cube = {dt: [k for k in p.kernels if k.spec.kind in ("conv2d", "gemm")] for dt, p in plans.items()}
    assert len(cube["fp16"]) == len(cube["bf16"]) > 0
    for k16, kb in zip(cube["fp16"], cube["bf16"]):
        assert kb.spec.dtype == "bf16" and kb.symbol.endswith("_bf16") and not k16.symbol.endswith("_bf16")
        assert spec_hash(kb.spec) != spec_hash(k16.spec)  # same dims, another kernel
        text = render_opspec(kb.spec, kb.instances, plans["bf16"].profile)
        weight = "input.b = bf16" if kb.spec.kind == "gemm" else "input.w = bf16"
        assert "dim.dtype = bf16" in text and "feature.dtype_cube = bf16" in text and weight in text, text
        assert kb.variant.family != "conv2d_winograd"
    weights = plans["bf16"].models[0].lowered.weights
    packed = [w for name, w in weights.items() if name.endswith(".w")]
    assert packed and all(w.dtype == np.uint16 for w in packed)  # Cube weights as bf16 bit patterns
    assert any("reason=winograd_dtype" in line for line in plans["bf16"].log.lines)
    assert not any("reason=winograd_dtype" in line for line in plans["fp16"].log.lines)


def test_tiny_bf16_model_matches_onnx_runtime(tmp_path):
    pytest.importorskip("onnxruntime")
    model = tiny_cnn(tmp_path / "tiny_bf16.onnx")
    # the model's kernels alone: the kernel list's bf16 kernels are the ISA builds' above
    pkg = build_package(tmp_path / "build", f"KILN_MODELS={model}", f"KILN_KERNEL_LIST={minimal_kernel_list(tmp_path)}",
                        "KILN_DTYPE=bf16", "KILN_ISA=auto")
    script = textwrap.dedent(f"""
        import json
        import numpy as np, onnxruntime as ort
        import kiln
        m = kiln.load("tiny_bf16")
        names = [k.name for k in kiln.kernels()]
        rng = np.random.default_rng(0)
        worst = []
        for seed in range(3):
            x = np.random.default_rng(seed).standard_normal((1, 16, 64, 64)).astype(np.float32)
            y = m.run(x)
            want = ort.InferenceSession({str(model)!r}, providers=["CPUExecutionProvider"]).run(None, {{"x": x}})[0]
            a, b = y.reshape(-1).astype(np.float64), want.reshape(-1).astype(np.float64)
            worst.append([float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)),
                          float(np.abs(a - b).max() / np.abs(b).max())])
        print(json.dumps({{"kernels": names, "worst": worst, "dtype": kiln.build_info()["dtype"]}}))
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(pkg)), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["dtype"] == "bf16"
    cube = [n for n in out["kernels"] if n.startswith(("conv2d_cube", "gemm_cube"))]
    assert cube and all(n.endswith("_bf16") for n in cube), out["kernels"]
    assert any("_acc" in n for n in cube) and any("_then_" in n for n in cube), out["kernels"]  # both fusions
    for cosine, max_rel in out["worst"]:
        assert cosine >= BF16_COSINE and max_rel <= BF16_MAX_REL, out["worst"]
    print(out["worst"])
